package log_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "doc-1", "doclog/ledger", "Q4 ledger", "Ünïcödé 文書 😀", "a\u00a0b", "\ufffd", `back\slash`, "zero\u200bwidth", "fam👨\u200d👩"} {
		require.NoError(t, oplog.CheckText(ok), "%q", ok)
	}
	for _, tc := range []struct{ in, err string }{
		{"doc\x1b]0;pwned\x07", "contains a control character (U+001B at byte 3)"},
		{"\x00", "contains a control character (U+0000 at byte 0)"},
		{"tab\there", "contains a control character (U+0009 at byte 3)"},
		{"line\n", "contains a control character (U+000A at byte 4)"},
		{"del\x7f", "contains a control character (U+007F at byte 3)"},
		{"é\u009b[2J", "contains a control character (U+009B at byte 2)"},
		{"ab\u202ecd", "contains a bidirectional formatting character (U+202E at byte 2)"},
		{"\u2066x\u2069", "contains a bidirectional formatting character (U+2066 at byte 0)"},
		{"x\u200f", "contains a bidirectional formatting character (U+200F at byte 1)"},
		{"x\u061c", "contains a bidirectional formatting character (U+061C at byte 1)"},
		{"x\u2028", "contains a line or paragraph separator (U+2028 at byte 1)"},
		{"doc-\xff", "not valid UTF-8 (0xff at byte 4)"},
		{"doc-\xe2\x80", "not valid UTF-8 (0xe2 at byte 4)"},
	} {
		err := oplog.CheckText(tc.in)
		require.EqualError(t, err, tc.err, "%q", tc.in)
		var ut *oplog.UnsafeTextError
		require.True(t, errors.As(err, &ut))
	}
}

// IsUnsafeRune is the rule the schemas' pattern states (record checks that);
// here it is held to Unicode's own categories: every rune it refuses is a
// control, a format character or a separator, and it refuses every control.
func TestIsUnsafeRuneIsControlsAndSpoofing(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.IsControl(r) {
			require.True(t, oplog.IsUnsafeRune(r), "U+%04X is a control", r)
		}
		if oplog.IsUnsafeRune(r) {
			require.True(t, unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp), "U+%04X", r)
		}
	}
}

func TestEscapeText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":                              "plain",
		"Ünïcödé 文書 😀 a\u00a0b":              "Ünïcödé 文書 😀 a\u00a0b",
		`back\slash "quoted"`:                `back\slash "quoted"`,
		"\x1b]0;pwned\x07\x1b[2J":            `\x1b]0;pwned\a\x1b[2J`,
		"cr\rnl\ntab\t":                      `cr\rnl\ntab\t`,
		"del\x7f c1\u009b":                   `del\x7f c1\u009b`,
		"ab\u202ecd \u2066 \u2028":           `ab\u202ecd \u2066 \u2028`,
		"bad\xff\xe2\x80 end":                `bad\xff\xe2\x80 end`,
		"\ufffd stays":                       "\ufffd stays",
		"private\ue000 unassigned\U000e0fff": `private\ue000 unassigned\U000e0fff`,
	} {
		got := oplog.EscapeText(in)
		require.Equal(t, want, got, "%q", in)
		require.True(t, utf8.ValidString(got))
		require.NoError(t, oplog.CheckText(got), "%q escapes to safe text", in)
		require.False(t, strings.ContainsAny(got, "\x1b\x07\r\n"))
	}
}
