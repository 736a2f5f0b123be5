package log_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

// FuzzDecodeToken: no input panics, and what decodes re-encodes to a token
// that decodes to the same coordinates.
func FuzzDecodeToken(f *testing.F) {
	f.Add(oplog.EncodeToken(oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{
		{DocumentID: "d", Scope: "global", Branch: "main", Index: 3},
	}}))
	f.Add("e30")
	f.Add("eyJjb29yZGluYXRlcyI6W119")
	f.Add("%%%")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := oplog.DecodeToken(s)
		if err != nil {
			var te *oplog.TokenError
			require.ErrorAs(t, err, &te)
			return
		}
		again, err := oplog.DecodeToken(oplog.EncodeToken(tok))
		require.NoError(t, err)
		require.Equal(t, tok, again)
		for _, c := range tok.Coordinates {
			require.NotEmpty(t, c.DocumentID)
			require.NotEmpty(t, c.Scope)
			require.NotEmpty(t, c.Branch)
			require.GreaterOrEqual(t, c.Index, int64(0))
		}
	})
}

func TestTokenWireForm(t *testing.T) {
	t.Parallel()
	tok := oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{
		{DocumentID: "d-1", Scope: "global", Branch: "main", Index: 4},
		{DocumentID: "d-1", Scope: "document", Branch: "main", Index: 0},
	}}
	s := oplog.EncodeToken(tok)
	require.NotContains(t, s, "=")
	got, err := oplog.DecodeToken(s)
	require.NoError(t, err)
	require.Equal(t, tok, got)

	// Padding is optional; an absent branch is the default branch.
	raw := base64.URLEncoding.EncodeToString([]byte(`{"coordinates":[{"documentId":"d","scope":"global","index":12}]}`))
	require.True(t, strings.HasSuffix(raw, "="), raw)
	got, err = oplog.DecodeToken(raw)
	require.NoError(t, err)
	require.Equal(t, oplog.DefaultBranch, got.Coordinates[0].Branch)

	_, err = oplog.DecodeToken(strings.Repeat("A", 70_000))
	var te *oplog.TokenError
	require.ErrorAs(t, err, &te)
}
