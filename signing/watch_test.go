package signing_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/signing"
)

// A key added to the directory is taken up, a file that does not parse
// keeps the keys in use, and a key removed is dropped.
func TestWatchKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o440))
	}
	write("k1", []byte(base64.StdEncoding.EncodeToString(pubOf(1))))
	keys, err := signing.LoadKeys(dir)
	require.NoError(t, err)
	v, err := signing.NewVerifier(keys, signing.Policies{Default: signing.Required})
	require.NoError(t, err)

	var (
		mu      sync.Mutex
		changes [][]string
		errs    []error
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.WatchKeys(ctx, dir, 5*time.Millisecond,
			func(ids []string) { mu.Lock(); changes = append(changes, ids); mu.Unlock() },
			func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
	}()
	t.Cleanup(func() { cancel(); <-done })
	ids := func() []string { return v.Keys().IDs() }

	write("k2", pemOf(t, pubOf(2)))
	require.Eventually(t, func() bool { return len(ids()) == 2 }, 10*time.Second, 5*time.Millisecond)
	k2, ok := v.Keys().Lookup("k2")
	require.True(t, ok)
	require.Equal(t, pubOf(2), k2.Public)

	write("k3", []byte("half written"))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(errs) > 0 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"k1", "k2"}, ids(), "a key set that does not read keeps the keys in use")
	mu.Lock()
	require.ErrorContains(t, errs[0], filepath.Join(dir, "k3"))
	mu.Unlock()

	require.NoError(t, os.Remove(filepath.Join(dir, "k3")))
	require.NoError(t, os.Remove(filepath.Join(dir, "k1")))
	require.Eventually(t, func() bool { return len(ids()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"k2"}, ids())
	mu.Lock()
	require.Equal(t, [][]string{{"k1", "k2"}, {"k2"}}, changes)
	mu.Unlock()
}
