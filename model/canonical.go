package model

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The hash of a scope state is a public contract: it is stored with every
// operation and announced on the topics, and any other implementation must be
// able to reproduce it from the state alone, so the encoding follows
// RFC 8785 (JSON Canonicalization Scheme) to the letter rather than whatever
// encoding/json happens to emit.

// UnsupportedValue reports a value in a state tree that has no JSON form: a
// Go type outside the JSON data model, or a NaN or infinite number.
type UnsupportedValue struct {
	Path  string
	Value any
}

func (e *UnsupportedValue) Error() string {
	return fmt.Sprintf("state value at %q has no canonical JSON form: %T %v", e.Path, e.Value, e.Value)
}

// under prefixes the path of an UnsupportedValue on the way out of the tree,
// so the common case (no error) builds no path at all.
func under(err error, token string) error {
	if uv, ok := err.(*UnsupportedValue); ok {
		uv.Path = "/" + token + uv.Path
	}
	return err
}

// AppendCanonical appends the RFC 8785 canonical JSON of v to dst. v is a JSON
// tree as encoding/json decodes into any (map[string]any, []any, string,
// float64, bool, nil); int, int64 and json.Number are accepted too so that
// reducers may store counters without converting them.
func AppendCanonical(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v)
}

// Canonical returns the RFC 8785 canonical JSON of v.
func Canonical(v any) ([]byte, error) {
	return AppendCanonical(nil, v)
}

// Hash returns base64(SHA-256(canonical JSON of state)), standard alphabet
// with padding, and the length of the canonical form (used as the state's
// size by the write cache). Apply does not call it: it keeps each state's
// encoding and hashes only what changed (StreamState); this is the full
// recomputation validation and tests compare with.
func Hash(state any) (hash string, size int, err error) {
	buf, err := Canonical(state)
	if err != nil {
		return "", 0, err
	}
	return HashBytes(buf), len(buf), nil
}

// HashBytes returns base64(SHA-256(b)) for an already canonical document.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func appendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendString(dst, x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return dst, &UnsupportedValue{Value: v}
		}
		return AppendNumber(dst, x), nil
	case int:
		return AppendNumber(dst, float64(x)), nil
	case int64:
		return AppendNumber(dst, float64(x)), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return dst, &UnsupportedValue{Value: v}
		}
		return AppendNumber(dst, f), nil
	case map[string]any:
		return appendObject(dst, x)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e); err != nil {
				return dst, under(err, strconv.Itoa(i))
			}
		}
		return append(dst, ']'), nil
	}
	return dst, &UnsupportedValue{Value: v}
}

// keysPool recycles the per-object key slices used for sorting.
var keysPool = sync.Pool{New: func() any { s := make([]string, 0, 16); return &s }}

func appendObject(dst []byte, m map[string]any) ([]byte, error) {
	kp := keysPool.Get().(*[]string)
	keys := (*kp)[:0]
	needUTF16 := false
	for k := range m {
		keys = append(keys, k)
		if !needUTF16 && hasHighBMPOrAstral(k) {
			needUTF16 = true
		}
	}
	if needUTF16 {
		slices.SortFunc(keys, CompareUTF16)
	} else {
		// Without code points at or above U+E000, UTF-8 byte order and
		// UTF-16 code-unit order agree, and plain string order is faster.
		slices.Sort(keys)
	}
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendValue(dst, m[k]); err != nil {
			err = under(err, k)
			break
		}
	}
	clear(keys)
	*kp = keys[:0]
	keysPool.Put(kp)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// hasHighBMPOrAstral reports whether s holds a code point >= U+E000, the only
// code points whose UTF-16 order differs from their UTF-8 byte order (lead
// bytes 0xEE and up).
func hasHighBMPOrAstral(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xEE {
			return true
		}
	}
	return false
}

// CompareUTF16 orders strings by their UTF-16 code units, as RFC 8785 sorts
// object keys. A supplementary code point encodes as a high surrogate
// (0xD800–0xDBFF), which sorts before BMP code points from U+E000 up even
// though its code point is larger.
func CompareUTF16(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if ca < utf8.RuneSelf && cb < utf8.RuneSelf {
			if ca != cb {
				return int(ca) - int(cb)
			}
			i++
			j++
			continue
		}
		ra, na := utf8.DecodeRuneInString(a[i:])
		rb, nb := utf8.DecodeRuneInString(b[j:])
		if ra != rb {
			ua, ub := firstUTF16Unit(ra), firstUTF16Unit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			// Same high surrogate: the low surrogates follow code-point order.
			return int(ra) - int(rb)
		}
		i += na
		j += nb
	}
	return (len(a) - i) - (len(b) - j)
}

func firstUTF16Unit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + ((r - 0x10000) >> 10)
}

const hexDigits = "0123456789abcdef"

// appendString writes s with the escaping of RFC 8785 §3.2.2.2 (ECMAScript
// JSON.stringify): the two-character escapes for \b \t \n \f \r " and \,
// \u00xx in lowercase hex for other control characters, everything else
// literal. Invalid UTF-8 becomes U+FFFD, as encoding/json decodes it.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += n
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendNumber writes f as ECMAScript's Number.prototype.toString does
// (RFC 8785 §3.2.2.3): the shortest digits that round-trip, in plain notation
// for magnitudes in [1e-6, 1e21) and exponent notation (1e+21, 1.5e-7)
// outside it; -0 is 0. f must be finite.
func AppendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var scratch [32]byte
	// 'e' with precision -1 gives the shortest round-trip digits as
	// d.ddddde±XX; ECMAScript picks the same digits, only the layout differs.
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64)
	mant, exp := e, 0
	for i := range e {
		if e[i] == 'e' {
			mant = e[:i]
			x, _ := strconv.Atoi(string(e[i+1:]))
			exp = x
			break
		}
	}
	var digitBuf [24]byte
	digits := digitBuf[:0]
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k := len(digits)
	n := exp + 1 // value = 0.d1d2…dk × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}
