package log

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckText returns a *UnsafeTextError when s may not name anything in
// doclog: ids (document, job, action), document types, branches, scopes,
// action types, document names and slugs. It refuses bytes that are not
// UTF-8 and every rune IsUnsafeRune reports, and accepts the rest of Unicode.
//
// These strings reach terminals, log viewers and web pages far from the
// producer that wrote them. A control character in one can retitle, clear or
// recolour an operator's terminal, and a bidirectional override can make an
// id read as another; neither has a use in a name. Payloads (action input,
// context, a job's meta) are the models' and producers' data and are not
// held to this rule: display code escapes them (EscapeText).
func CheckText(s string) error {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return &UnsafeTextError{Offset: i, Byte: s[i], Invalid: true}
		}
		if IsUnsafeRune(r) {
			return &UnsafeTextError{Offset: i, Rune: r}
		}
		i += n
	}
	return nil
}

// IsUnsafeRune reports whether CheckText refuses r: the C0 controls
// (U+0000–U+001F), DEL (U+007F) and the C1 controls (U+0080–U+009F); the
// bidirectional formatting characters (U+061C, U+200E, U+200F,
// U+202A–U+202E, U+2066–U+2069); and the line and paragraph separators
// U+2028 and U+2029, which some viewers treat as line breaks. Tab, newline
// and carriage return are controls too.
func IsUnsafeRune(r rune) bool {
	switch {
	case r <= 0x1f, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x2028 && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// UnsafeTextError is CheckText's refusal: what it found, and where.
type UnsafeTextError struct {
	Offset  int  // the byte offset in the string
	Rune    rune // the refused rune, unless Invalid
	Byte    byte // the first byte that is not UTF-8, when Invalid
	Invalid bool // the text is not valid UTF-8 at Offset
}

func (e *UnsafeTextError) Error() string {
	var what string
	switch r := e.Rune; {
	case e.Invalid:
		return fmt.Sprintf("not valid UTF-8 (0x%02x at byte %d)", e.Byte, e.Offset)
	case r <= 0x9f:
		what = "a control character"
	case r == 0x2028 || r == 0x2029:
		what = "a line or paragraph separator"
	default:
		what = "a bidirectional formatting character"
	}
	return fmt.Sprintf("contains %s (U+%04X at byte %d)", what, e.Rune, e.Offset)
}

// EscapeText returns s with every rune that is not graphic (controls,
// format characters such as bidirectional overrides, separators other than
// spaces, private-use and unassigned code points) and every byte that is not
// UTF-8 written as a Go escape (\x1b, \a, \u202e, \xff), and the rest of s
// as is. It is for showing text of unknown origin in a terminal or a log
// line: the result holds no rune CheckText refuses, ordinary text in any
// script is unchanged, and a backslash already in s stays a single
// backslash, so the result is for reading, not for unquoting.
func EscapeText(s string) string {
	if isGraphic(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsGraphic(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRuneToGraphic(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

func isGraphic(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return strings.IndexFunc(s[i:], func(r rune) bool { return r == utf8.RuneError || !unicode.IsGraphic(r) }) < 0
		}
	}
	return true
}
