package model_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/model"
)

type vectors struct {
	Hash struct {
		Cases []struct {
			Name      string          `json:"name"`
			State     json.RawMessage `json:"state"`
			Canonical string          `json:"canonical"`
			SHA256    string          `json:"sha256_base64"`
		} `json:"cases"`
	} `json:"hash"`
	OpID struct {
		Cases []struct {
			JobID string `json:"jobId"`
			N     int    `json:"n"`
			OpID  string `json:"opId"`
		} `json:"cases"`
	} `json:"opId"`
	IdempotencyJobID struct {
		Cases []struct {
			Key   string `json:"idempotencyKey"`
			JobID string `json:"jobId"`
		} `json:"cases"`
	} `json:"idempotencyJobId"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	raw, err := os.ReadFile("../testdata/identities-and-hashes.json")
	require.NoError(t, err)
	var v vectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v.Hash.Cases)
	require.NotEmpty(t, v.OpID.Cases)
	require.NotEmpty(t, v.IdempotencyJobID.Cases)
	return v
}

func TestHashVectors(t *testing.T) {
	t.Parallel()
	for _, c := range loadVectors(t).Hash.Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			state, err := model.DecodeJSON(c.State)
			require.NoError(t, err)
			canon, err := model.Canonical(state)
			require.NoError(t, err)
			require.Equal(t, c.Canonical, string(canon))
			h, size, err := model.Hash(state)
			require.NoError(t, err)
			require.Equal(t, c.SHA256, h)
			require.Equal(t, len(c.Canonical), size)
			require.Equal(t, c.SHA256, model.HashBytes(canon))
		})
	}
}

func TestOpIDVectors(t *testing.T) {
	t.Parallel()
	for _, c := range loadVectors(t).OpID.Cases {
		require.Equal(t, c.OpID, model.OpID(c.JobID, c.N), "job %s action %d", c.JobID, c.N)
	}
}

func TestJobIDVectors(t *testing.T) {
	t.Parallel()
	for _, c := range loadVectors(t).IdempotencyJobID.Cases {
		require.Equal(t, c.JobID, model.JobIDFromIdempotencyKey(c.Key), "key %s", c.Key)
	}
}

// The ECMAScript Number.prototype.toString cases of RFC 8785 Appendix B and
// the boundaries of plain versus exponent notation.
func TestAppendNumberECMAScript(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{math.Float64frombits(0x0000000000000001), "5e-324"},
		{math.Float64frombits(0x8000000000000001), "-5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{-math.MaxFloat64, "-1.7976931348623157e+308"},
		{4.5, "4.5"},
		{2e-3, "0.002"},
		{1e-6, "0.000001"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{1e21, "1e+21"},
		{1e20, "100000000000000000000"},
		{999999999999999900000, "999999999999999900000"},
		{math.Float64frombits(0x44b52d02c7e14af5), "9.999999999999997e+22"},
		{math.Float64frombits(0x44b52d02c7e14af6), "1e+23"},
		{math.Float64frombits(0x4340000000000000), "9007199254740992"},
		{math.Float64frombits(0x433fffffffffffff), "9007199254740991"},
		{1 << 60, "1152921504606847000"},
		{0.1, "0.1"},
		{-123.456, "-123.456"},
		{123456789.125, "123456789.125"},
		{295147905179352830000, "295147905179352830000"},
		{math.Float64frombits(0x3eb0c6f7a0b5ed8d), "0.000001"},
		{math.Float64frombits(0x3eb0c6f7a0b5ed8c), "9.999999999999997e-7"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, string(model.AppendNumber(nil, c.in)), "%v", c.in)
	}
}

func TestCanonicalRejectsNonJSON(t *testing.T) {
	t.Parallel()
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"a": []any{struct{}{}}}} {
		_, err := model.Canonical(v)
		var uv *model.UnsupportedValue
		require.ErrorAs(t, err, &uv)
	}
}

func TestCanonicalStringEscapes(t *testing.T) {
	t.Parallel()
	got, err := model.Canonical("\u2028\u007f\x00\b\f\r\u00e9\xff")
	require.NoError(t, err)
	require.Equal(t, "\"\u2028\u007f\\u0000\\b\\f\\r\u00e9\uFFFD\"", string(got))
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	// U+FF21 (fullwidth A) sorts after U+1F600 in UTF-16 (high surrogate
	// 0xD83D < 0xFF21) but before it in UTF-8 byte order.
	require.Negative(t, model.CompareUTF16("\U0001F600", "\uFF21"))
	require.Negative(t, model.CompareUTF16("\U0001F600", "\uE000"))
	require.Positive(t, model.CompareUTF16("\uD7FF", "\u00e9"))
	require.Negative(t, model.CompareUTF16("ab", "abc"))
	require.Zero(t, model.CompareUTF16("é😀", "é😀"))
	require.Negative(t, model.CompareUTF16("\U0001F600", "\U0001F601"))
}
