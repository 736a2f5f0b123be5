package ctlcli

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/jedib0t/go-pretty/v6/table"

	oplog "github.com/doclog/doclog/log"
)

// What doclogctl prints comes largely from producers: ids, names and error
// messages in dead letters, job results and documents, some of them written
// before ingest refused hostile text or straight to a topic. A terminal acts
// on the control characters in such text (an escape sequence can retitle,
// clear or recolour it) and shows bidirectional overrides as a reordered
// line, so every cell, title and error line goes through oplog.EscapeText,
// and JSON output escapes what encoding/json leaves raw.

// escapingTable is the table.Writer every command fills: the rows, headers,
// footers, title and caption it is given reach the table escaped.
type escapingTable struct{ table.Writer }

func (t escapingTable) AppendHeader(row table.Row, configs ...table.RowConfig) {
	t.Writer.AppendHeader(escapeRow(row), configs...)
}

func (t escapingTable) AppendRow(row table.Row, configs ...table.RowConfig) {
	t.Writer.AppendRow(escapeRow(row), configs...)
}

func (t escapingTable) AppendRows(rows []table.Row, configs ...table.RowConfig) {
	for _, row := range rows {
		t.AppendRow(row, configs...)
	}
}

func (t escapingTable) AppendFooter(row table.Row, configs ...table.RowConfig) {
	t.Writer.AppendFooter(escapeRow(row), configs...)
}

func (t escapingTable) SetTitle(format string, a ...any) {
	t.Writer.SetTitle("%s", oplog.EscapeText(fmt.Sprintf(format, a...)))
}

func (t escapingTable) SetCaption(format string, a ...any) {
	t.Writer.SetCaption("%s", oplog.EscapeText(fmt.Sprintf(format, a...)))
}

func escapeRow(row table.Row) table.Row {
	out := make(table.Row, len(row))
	for i, v := range row {
		out[i] = escapeCell(v)
	}
	return out
}

// escapeCell returns numbers and booleans as they are, so the table aligns
// them as numbers, and anything else as its text, escaped.
func escapeCell(v any) any {
	if v == nil {
		return ""
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if _, ok := v.(fmt.Stringer); !ok {
			return v
		}
	}
	return oplog.EscapeText(fmt.Sprint(v))
}

// escapeLines escapes each line of s, keeping its line breaks: for error
// messages, which may span lines but must not drive the terminal.
func escapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = oplog.EscapeText(l)
	}
	return strings.Join(lines, "\n")
}

// escapeJSON rewrites, in valid JSON text as encoding/json writes it, every
// rune that is not graphic and that encoding/json leaves raw (DEL, the C1
// controls, bidirectional overrides and other format characters) as a \u
// escape. Such runes can only be inside strings, so the JSON means the same;
// encoding/json itself escapes the C0 controls, U+2028 and U+2029.
func escapeJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r >= 0x7f && !unicode.IsGraphic(r) }) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r < 0x7f || unicode.IsGraphic(r) {
			out = append(out, b[:n]...)
		} else if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			out = appendU(appendU(out, hi), lo)
		} else {
			out = appendU(out, r)
		}
		b = b[n:]
	}
	return out
}

func appendU(b []byte, r rune) []byte {
	b = append(b, `\u`...)
	s := strconv.FormatInt(int64(r), 16)
	b = append(b, "0000"[len(s):]...)
	return append(b, s...)
}
