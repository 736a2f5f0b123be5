package model_test

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/model/modeltest"
)

// benchDoc builds a doclog/json document whose global state's canonical form
// is about size bytes: records of ~88 bytes, the shape of typical documents.
func benchDoc(b testing.TB, size int) *modeltest.Doc {
	d := modeltest.Created(b, builtins(b), "doclog/json")
	patch := map[string]any{}
	for i := 0; i*88 < size; i++ {
		patch[fmt.Sprintf("item-%05d", i)] = map[string]any{"title": "a record of moderate length", "n": i, "ok": true, "tags": []any{"x", "y"}}
	}
	d.Must(oplog.ScopeGlobal, "MERGE_PATCH", patch)
	return d
}

var benchSizes = []int{1 << 10, 100 << 10, 1 << 20}

func sizeName(size int) string {
	if size >= 1<<20 {
		return fmt.Sprintf("state=%dMB", size>>20)
	}
	return fmt.Sprintf("state=%dKB", size>>10)
}

// wholeJSON is doclog/json's merge patch without its declaration of what it
// touches: every action copies and hashes the whole state, as every action
// did before incremental hashing.
func wholeJSON(b testing.TB) *model.Registry {
	merge, _ := jsondoc.Model().Action(jsondoc.ActionMergePatch)
	undeclared := *merge
	undeclared.Touches = nil
	spec := model.MustSpec(model.Spec{
		DocumentType: "doclog/json", ModelVersion: 1,
		Initial: map[string]func() any{
			oplog.ScopeGlobal: func() any { return map[string]any{} },
			oplog.ScopeLocal:  func() any { return map[string]any{} },
		},
		ActionList: []*model.ActionSpec{&undeclared},
	})
	reg, err := model.NewRegistry(spec)
	require.NoError(b, err)
	return reg
}

// BenchmarkApply measures what the executor pays per single-action job: a
// copy of the head (StreamState.Clone), then reduce and hash of a merge
// patch that changes one member of one record, on states of 1 KB, 100 KB
// and 1 MB. hash=incremental is doclog/json as it is (the action declares
// its paths: the copy is shared, the hash re-encodes the path);
// hash=full is the same action undeclared (deep copy, full encoding).
func BenchmarkApply(b *testing.B) {
	for _, size := range benchSizes {
		for _, mode := range []string{"incremental", "full"} {
			b.Run(sizeName(size)+"/hash="+mode, func(b *testing.B) {
				d := benchDoc(b, size)
				reg := d.Reg
				if mode == "full" {
					reg = wholeJSON(b)
				}
				docSt, st := d.Stream(oplog.ScopeDocument), d.Stream(oplog.ScopeGlobal)
				records := size / 88
				i := 0
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuTime()
				for b.Loop() {
					i++
					k := fmt.Sprintf("item-%05d", i*7919%records)
					a := d.Action(oplog.ScopeGlobal, "MERGE_PATCH", map[string]any{k: map[string]any{"n": i}})
					next := st.Clone()
					if _, err := reg.Apply(docSt, next, &a); err != nil {
						b.Fatal(err)
					}
					st = next
				}
				// CPU time is steadier than wall time on a shared machine.
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
				b.ReportMetric(float64(st.Size), "state-bytes")
				full, _, err := model.Hash(st.State)
				require.NoError(b, err)
				require.Equal(b, full, st.Hash)
			})
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHash isolates a full canonicalization + SHA-256.
func BenchmarkHash(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
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

// BenchmarkClone is the deep copy of a state (CloneJSON): what the
// executor's per-job copy of the head costs for a model whose actions do not
// declare what they touch (a declared one's is a struct copy).
func BenchmarkClone(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			st := benchDoc(b, size).Stream(oplog.ScopeGlobal)
			b.ReportAllocs()
			for b.Loop() {
				require.NotNil(b, model.CloneJSON(st.State))
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
// canonical JSON, the unit the write cache's byte bound counts: its tree and
// the kept canonical encoding, as a head rebuilt from a keyframe holds them.
func BenchmarkHeapRatio(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("state=%dKB", size>>10), func(b *testing.B) {
			st := benchDoc(b, size).Stream(oplog.ScopeGlobal)
			kf, err := st.Keyframe()
			require.NoError(b, err)
			const n = 100
			var ratio float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				held := make([]*model.StreamState, n)
				for i := range held {
					held[i], err = model.FromKeyframe(kf)
					require.NoError(b, err)
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
