package projectors

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

// Merging a poll's partitions shares a stream only one of them has and
// combines one both have into a copy, leaving both sides as they were (a
// retry merges them again).
func TestWantsMerge(t *testing.T) {
	t.Parallel()
	op := func(id string, i int64) oplog.Operation {
		return oplog.Operation{DocumentID: id, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch, Index: i}
	}
	p0, p1 := wants{}, wants{}
	p0.add(globalKey("a"), "t", 1, []oplog.Operation{op("a", 0), op("a", 1)})
	p0.add(globalKey("b"), "t", 0, []oplog.Operation{op("b", 0)})
	p1.add(globalKey("b"), "", 2, []oplog.Operation{op("b", 1), op("b", 2)})

	for range 2 {
		w := wants{}
		w.merge(p0)
		w.merge(p1)
		require.Same(t, p0[globalKey("a")], w[globalKey("a")], "a stream of one partition is shared")
		b := w[globalKey("b")]
		require.Equal(t, int64(2), b.upTo)
		require.Equal(t, "t", b.documentType)
		require.Len(t, b.ops, 3)
		require.Len(t, p0[globalKey("b")].ops, 1, "merging left the partition's wants alone")
		require.Len(t, p1[globalKey("b")].ops, 2)
	}
}

// globalKey is document id's global stream on main.
func globalKey(id string) oplog.StreamKey {
	return oplog.StreamKey{DocumentID: id, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
}
