package ctlcli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/stretchr/testify/require"
)

// Every way a command puts text into a table escapes it, numbers stay
// numbers, and JSON output escapes what encoding/json leaves raw while
// decoding to the same values.
func TestRenderEscapes(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	g := &globals{output: "table", out: &out}
	require.NoError(t, g.render(nil, func(tw table.Writer) {
		tw.SetTitle("title %s", pwn)
		tw.SetCaption("caption %s", pwn)
		tw.AppendHeader(table.Row{"h" + pwn, "n"})
		tw.AppendRow(table.Row{"row" + pwn, 42})
		tw.AppendRows([]table.Row{{"rows" + pwn, 1.5}, {nil, 2 * time.Second}})
		tw.AppendFooter(table.Row{"foot" + pwn, true})
	}))
	requireInert(t, "a table", out.String())
	// The style upper-cases headers and footers.
	for _, want := range []string{`title \x1b]0;pwned\a`, `caption \x1b]0;pwned\a`, `H\X1B]0;PWNED\A`, `row\x1b]0;pwned\a`,
		`rows\x1b]0;pwned\a`, `FOOT\X1B]0;PWNED\A`, " 42 ", " 1.5 ", " 2s ", " TRUE "} {
		require.Contains(t, out.String(), want)
	}

	out.Reset()
	g.output = "json"
	v := map[string]any{"s": "a" + pwn + "\U000e0001<&>\u2028", "n": 1}
	require.NoError(t, g.render(v, nil))
	requireInert(t, "JSON", out.String())
	require.NotContains(t, out.String(), "\U000e0001")
	require.Contains(t, out.String(), `\u007f\u009b\u202e\udb40\udc01`)
	var back map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &back))
	require.Equal(t, v["s"], back["s"])
}
