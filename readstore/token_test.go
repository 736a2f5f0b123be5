package readstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/readstore"
)

// FuzzDecodeToken: no input panics, and what decodes re-encodes to a token
// that decodes to the same coordinates.
func FuzzDecodeToken(f *testing.F) {
	f.Add(readstore.EncodeToken(oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{
		{DocumentID: "d", Scope: "global", Branch: "main", Index: 3},
	}}))
	f.Add("e30")
	f.Add("eyJjb29yZGluYXRlcyI6W119")
	f.Add("%%%")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := readstore.DecodeToken(s)
		if err != nil {
			var te *readstore.TokenError
			require.ErrorAs(t, err, &te)
			return
		}
		again, err := readstore.DecodeToken(readstore.EncodeToken(tok))
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
