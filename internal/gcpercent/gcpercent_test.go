package gcpercent

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tests set the process's target: none runs in parallel, and each puts
// the runtime back as it found it.
func restore(t *testing.T) {
	t.Helper()
	was := debug.SetGCPercent(100)
	debug.SetGCPercent(was)
	t.Cleanup(func() { debug.SetGCPercent(was) })
}

func TestDefaultWithoutGOGC(t *testing.T) {
	restore(t)
	t.Setenv("GOGC", "")
	require.NoError(t, os.Unsetenv("GOGC"))
	n, src := Apply(0, false)
	require.Equal(t, Default, n, "0 is the default")
	require.Equal(t, FromDefault, src)
	require.Equal(t, Default, current(), "the runtime's target is set")
}

func TestAnEmptyGOGCIsUnset(t *testing.T) {
	restore(t)
	t.Setenv("GOGC", "") // the runtime's default, as if unset
	n, src := Apply(0, false)
	require.Equal(t, Default, n)
	require.Equal(t, FromDefault, src)
}

func TestGOGCWinsOverTheDefault(t *testing.T) {
	restore(t)
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // as the runtime would have read it at start
	n, src := Apply(Default, false)
	require.Equal(t, 150, n)
	require.Equal(t, FromGOGC, src)
	require.Equal(t, 150, current())

	t.Setenv("GOGC", "off")
	debug.SetGCPercent(-1)
	n, src = Apply(Default, false)
	require.Equal(t, -1, n, "off reads as -1")
	require.Equal(t, FromGOGC, src)
}

func TestAnExplicitSettingWinsOverGOGC(t *testing.T) {
	restore(t)
	t.Setenv("GOGC", "150")
	n, src := Apply(300, true)
	require.Equal(t, 300, n)
	require.Equal(t, FromSetting, src)
	require.Equal(t, 300, current())
}

func TestValidate(t *testing.T) {
	require.NoError(t, Validate(10))
	require.NoError(t, Validate(Default))
	require.NoError(t, Validate(0))
	require.EqualError(t, Validate(9), "--gc-percent must be at least 10 (or 0 for 200), got 9")
	require.Error(t, Validate(-1))
}
