package record

import (
	"strconv"
	"time"
	"unicode/utf8"

	oplog "github.com/doclog/doclog/log"
)

// The encoders append JSON by hand instead of going through encoding/json's
// reflection: executors announce every committed job and ingest produces
// every submitted one, thousands a second, and appending into a buffer the
// caller can reuse costs no allocation beyond that buffer. The output is
// byte for byte what an encoding/json Encoder with SetEscapeHTML(false)
// produces for the same values (tests hold it to that).

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does
// without HTML escaping: invalid UTF-8 becomes U+FFFD, and U+2028 and U+2029
// are escaped so the output is also valid JavaScript.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendKey appends "key": after a comma when the object has fields already.
// Keys are constants without characters to escape.
func appendKey(b []byte, key string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendStringField(b []byte, key, v string, first bool) []byte {
	return appendString(appendKey(b, key, first), v)
}

func appendIntField(b []byte, key string, v int64, first bool) []byte {
	return strconv.AppendInt(appendKey(b, key, first), v, 10)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendStreamKey(b []byte, k oplog.StreamKey) []byte {
	b = appendStringField(append(b, '{'), "documentId", k.DocumentID, true)
	b = appendStringField(b, "scope", k.Scope, false)
	b = appendStringField(b, "branch", k.Branch, false)
	return append(b, '}')
}

// appendAction encodes an action as encoding/json does with its struct tags.
func appendAction(b []byte, a *oplog.Action) []byte {
	b = appendStringField(append(b, '{'), "id", a.ID, true)
	b = appendStringField(b, "type", a.Type, false)
	b = appendStringField(b, "scope", a.Scope, false)
	b = appendIntField(b, "timestampUtcMs", a.TimestampUtcMs, false)
	if len(a.Input) > 0 {
		b = appendRaw(appendKey(b, "input", false), a.Input)
	}
	if len(a.Context) > 0 {
		b = appendRaw(appendKey(b, "context", false), a.Context)
	}
	if s := a.Signature; s != nil {
		b = appendStringField(append(appendKey(b, "signature", false), '{'), "keyId", s.KeyID, true)
		b = appendStringField(b, "algorithm", s.Algorithm, false)
		b = appendStringField(b, "value", s.Value, false)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendOperation encodes an operation as encoding/json does with its struct
// tags (ordinal and txid omitted when zero, writtenAt when the zero time).
func appendOperation(b []byte, op *oplog.Operation) []byte {
	b = appendStringField(append(b, '{'), "opId", op.OpID, true)
	b = appendStringField(b, "jobId", op.JobID, false)
	b = appendStringField(b, "documentId", op.DocumentID, false)
	b = appendStringField(b, "documentType", op.DocumentType, false)
	b = appendStringField(b, "scope", op.Scope, false)
	b = appendStringField(b, "branch", op.Branch, false)
	b = appendIntField(b, "index", op.Index, false)
	b = appendIntField(b, "skip", op.Skip, false)
	b = appendStringField(b, "hash", op.Hash, false)
	b = appendIntField(b, "timestampUtcMs", op.TimestampUtcMs, false)
	b = appendIntField(b, "version", int64(op.Version), false)
	b = appendAction(appendKey(b, "action", false), &op.Action)
	if op.Ordinal != 0 {
		b = appendIntField(b, "ordinal", op.Ordinal, false)
	}
	if op.TxID != 0 {
		b = strconv.AppendUint(appendKey(b, "txid", false), op.TxID, 10)
	}
	if !op.WrittenAt.IsZero() {
		b = appendTime(appendKey(b, "writtenAt", false), op.WrittenAt)
	}
	return append(b, '}')
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendRaw appends an already valid JSON value, compacted as encoding/json
// compacts a json.RawMessage. Values that carry no insignificant whitespace,
// the common case, are copied as they are.
func appendRaw(b []byte, raw []byte) []byte {
	if !hasSpace(raw) {
		return append(b, raw...)
	}
	inString, escaped := false, false
	for _, c := range raw {
		if inString {
			b = append(b, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		}
		b = append(b, c)
	}
	return b
}

// hasSpace reports whether raw may hold whitespace outside strings. Inside
// strings JSON allows no raw control characters, so any \t \n \r is outside
// one; a space may be either, and then appendRaw looks closer.
func hasSpace(raw []byte) bool {
	for _, c := range raw {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			return true
		}
	}
	return false
}
