package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

func TestMarkUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true}, // admin shutdown
		{&pgconn.PgError{Code: "08006"}, true}, // connection failure
		{&pgconn.PgError{Code: "53300"}, true}, // too many connections
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "22P02"}, false},
		{errors.New("conn closed"), true},
		{errors.New("syntax error"), false},
	} {
		err := fmt.Errorf("reading: %w", tc.err)
		markUnavailable(&err)
		require.Equal(t, tc.want, oplog.IsUnavailable(err), "%v", tc.err)
		require.ErrorIs(t, err, tc.err, "the cause stays reachable")
	}
	var none error
	markUnavailable(&none)
	require.NoError(t, none)
}
