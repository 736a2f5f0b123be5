package feed

import (
	"fmt"
	"strconv"
	"strings"
)

// Position is a place in the feed: transaction Tx of the log, of which the
// first Done events are behind it. Every transaction before Tx is behind it
// whole. An event's Position is the one just after it, so resuming from an
// event's position continues with the next event; a transaction's events
// are assembled in the same order every time (its rows never change once
// visible), so a count is enough to point inside one.
type Position struct {
	Tx   uint64
	Done int
}

// The largest parts a parsed position may have: a transaction id fits 19
// digits for ages, and no transaction holds a billion jobs. The bounds are
// the OpenAPI document's pattern.
const (
	maxTxDigits   = 19
	maxDoneDigits = 9
)

// String is the position's wire form, "<tx>-<done>": URL-safe ASCII, and
// never a valid log cursor, so one is not taken for the other.
func (p Position) String() string {
	return strconv.FormatUint(p.Tx, 10) + "-" + strconv.Itoa(p.Done)
}

// PositionError is a cursor that is not a feed position.
type PositionError struct {
	Cursor string
	Reason string
}

func (e *PositionError) Error() string {
	return fmt.Sprintf("cursor %q is not a change feed position (%s); use the id of an event or heartbeat", e.Cursor, e.Reason)
}

// ParsePosition reads a position's wire form.
func ParsePosition(s string) (Position, error) {
	t, d, ok := strings.Cut(s, "-")
	if !ok {
		return Position{}, &PositionError{Cursor: s, Reason: "no '-'"}
	}
	if !digits(t, maxTxDigits) || !digits(d, maxDoneDigits) {
		return Position{}, &PositionError{Cursor: s, Reason: fmt.Sprintf("it must be 1 to %d digits, '-', 1 to %d digits", maxTxDigits, maxDoneDigits)}
	}
	tx, err1 := strconv.ParseUint(t, 10, 64)
	done, err2 := strconv.Atoi(d)
	if err1 != nil || err2 != nil {
		return Position{}, &PositionError{Cursor: s, Reason: "a part is out of range"}
	}
	return Position{Tx: tx, Done: done}, nil
}

// digits reports whether s is 1 to n ASCII digits: the wire form has no
// sign or space.
func digits(s string, n int) bool {
	if s == "" || len(s) > n {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
