package model_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/modeltest"
)

// benchDoc builds a doclog/json document whose global state's canonical form
// is about size bytes: records of ~88 bytes, the shape of typical documents.
func benchDoc(b *testing.B, size int) *modeltest.Doc {
	d := modeltest.Created(b, builtins(b), "doclog/json")
	patch := map[string]any{}
	for i := 0; i*88 < size; i++ {
		patch[fmt.Sprintf("item-%05d", i)] = map[string]any{"title": "a record of moderate length", "n": i, "ok": true, "tags": []any{"x", "y"}}
	}
	d.Must(oplog.ScopeGlobal, "MERGE_PATCH", patch)
	return d
}

// BenchmarkApply measures reduce + hash of one action (what the executor
// pays per action): a merge patch touching one member of a 1 KB and a 100 KB
// state.
func BenchmarkApply(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("state=%dKB", size>>10), func(b *testing.B) {
			d := benchDoc(b, size)
			docSt, st := d.Stream(oplog.ScopeDocument), d.Stream(oplog.ScopeGlobal)
			a := d.Action(oplog.ScopeGlobal, "MERGE_PATCH", map[string]any{"item-00000": map[string]any{"n": 1}})
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := d.Reg.Apply(docSt, st, &a); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(st.Size), "state-bytes")
		})
	}
}

// BenchmarkHash isolates canonicalization + SHA-256.
func BenchmarkHash(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("state=%dKB", size>>10), func(b *testing.B) {
			state := benchDoc(b, size).State(oplog.ScopeGlobal)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := model.Hash(state); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClone is the per-batch copy the write cache hands out.
func BenchmarkClone(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("state=%dKB", size>>10), func(b *testing.B) {
			st := benchDoc(b, size).Stream(oplog.ScopeGlobal)
			b.ReportAllocs()
			for b.Loop() {
				require.NotNil(b, st.Clone())
			}
		})
	}
}

// BenchmarkLedgerTransfer is a typical small business action end to end.
func BenchmarkLedgerTransfer(b *testing.B) {
	d := modeltest.Created(b, builtins(b), "doclog/ledger")
	for i := range 10 {
		d.Must(oplog.ScopeGlobal, "OPEN_ACCOUNT", map[string]any{"accountId": fmt.Sprint("acct-", i), "initialBalance": 1 << 40})
	}
	docSt, st := d.Stream(oplog.ScopeDocument), d.Stream(oplog.ScopeGlobal)
	a := d.Action(oplog.ScopeGlobal, "TRANSFER", map[string]any{"fromAccountId": "acct-1", "toAccountId": "acct-2", "amount": 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Reg.Apply(docSt, st, &a); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(st.Size), "state-bytes")
}

// BenchmarkHeapRatio reports the Go heap a held state takes per byte of its
// canonical JSON, the unit the write cache's byte bound counts.
func BenchmarkHeapRatio(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("state=%dKB", size>>10), func(b *testing.B) {
			st := benchDoc(b, size).Stream(oplog.ScopeGlobal)
			const n = 100
			var ratio float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				held := make([]*model.StreamState, n)
				for i := range held {
					held[i] = st.Clone()
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(held)
				ratio = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n*st.Size)
			}
			require.Positive(b, ratio)
			b.ReportMetric(ratio, "heap-bytes/canonical-byte")
		})
	}
}
