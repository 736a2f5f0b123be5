package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		// The log classifies its own driver's errors (log/postgres).
		{fmt.Errorf("append: %w", &oplog.Unavailable{Err: errors.New("57P01 terminating connection")}), true},
		{fmt.Errorf("append: %w", errors.New("23505 duplicate key")), false},
		{&oplog.RevisionMismatch{}, false},
		{errors.New("something else"), false},
	} {
		require.Equal(t, tc.want, isUnavailable(tc.err), "%v", tc.err)
	}
}
