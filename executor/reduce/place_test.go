package reduce_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/reduce"
	oplog "github.com/doclog/doclog/log"
)

// A placement may store one operation id at two indexes of a request (two
// jobs of a batch moving it in turn): each built operation takes the log's
// ordinal of its own row.
func TestStoredTellsRowsOfOneOpIDApart(t *testing.T) {
	t.Parallel()
	k := key(oplog.ScopeGlobal)
	built := []oplog.Operation{
		{OpID: "x", DocumentID: k.DocumentID, Scope: k.Scope, Branch: k.Branch, Index: 3},
		{OpID: "x", DocumentID: k.DocumentID, Scope: k.Scope, Branch: k.Branch, Index: 5},
	}
	rows := []oplog.Operation{built[0], built[1]}
	rows[0].Ordinal, rows[1].Ordinal = 10, 12
	stored := reduce.Stored(built, &oplog.AppendResult{Operations: rows})
	require.Equal(t, int64(10), stored[0].Ordinal)
	require.Equal(t, int64(12), stored[1].Ordinal)
}
