package servicecli

import (
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/app"
)

// serve sets the collector's target: the default unless GOGC says
// otherwise, and an explicit --gc-percent (here from DOCLOG_GC_PERCENT)
// over GOGC; the log line says which.
func TestServeSetsTheCollectorTarget(t *testing.T) {
	was := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(was) })
	run := func(env map[string]string) (int, string) {
		for _, k := range []string{"GOGC", "DOCLOG_GC_PERCENT", "DOCLOG_CONFIG"} {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
		for k, v := range env {
			t.Setenv(k, v)
		}
		cmd := newServeCmd(&bytes.Buffer{})
		require.NoError(t, cmd.ParseFlags(nil))
		require.NoError(t, fromEnv(cmd, nil))
		s := &app.Settings{}
		s.GCPercent = mustInt(t, cmd.Flags().Lookup("gc-percent").Value.String())
		core, logs := observer.New(zap.InfoLevel)
		applyGCPercent(cmd, s, zap.New(core))
		entries := logs.FilterMessage("garbage collector target").All()
		require.Len(t, entries, 1)
		f := entries[0].ContextMap()
		target := debug.SetGCPercent(100)
		require.EqualValues(t, target, f["gc_percent"])
		return target, f["from"].(string)
	}

	n, from := run(nil)
	require.Equal(t, 200, n)
	require.Equal(t, "default", from)

	debug.SetGCPercent(150) // as the runtime read GOGC=150 at start
	n, from = run(map[string]string{"GOGC": "150"})
	require.Equal(t, 150, n)
	require.Equal(t, "GOGC", from)

	n, from = run(map[string]string{"GOGC": "150", "DOCLOG_GC_PERCENT": "300"})
	require.Equal(t, 300, n)
	require.Equal(t, "setting", from)
}

func mustInt(t *testing.T, s string) int {
	t.Helper()
	var n int
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}
