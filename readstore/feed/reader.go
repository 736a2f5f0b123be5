package feed

import (
	"context"
	"fmt"

	oplog "github.com/doclog/doclog/log"
)

// TailLog is the part of the log the Reader pages.
type TailLog interface {
	Tail(ctx context.Context, after oplog.Cursor, limit int) (oplog.TailPage, error)
	CursorBefore(txid uint64) oplog.Cursor
}

// Transaction is one transaction's events. Events before From were behind
// the position the reader started at: they are there for Matcher.Observe,
// not to be sent again.
type Transaction struct {
	Tx     uint64
	Events []Event
	From   int
}

// Reader pages the log's tail from a position, one transaction at a time.
// It holds one page of rows, and a whole transaction when one is larger
// than a page: a transaction's jobs are only known once all its rows are,
// and its rows are all visible at once, so they can be read on.
type Reader struct {
	log  TailLog
	page int
	pos  Position

	buf     []oplog.Operation // rows read, not yet assembled: buf[head:]
	head    int
	after   oplog.Cursor // the cursor after buf's last row
	drained bool         // the last page was short: buf holds every visible row
}

// NewReader returns a reader from pos that reads pageSize rows at a time.
func NewReader(log TailLog, pos Position, pageSize int) *Reader {
	return &Reader{log: log, page: pageSize, pos: pos}
}

// Position is where the reader is: after the last transaction Next
// returned, or where it started.
func (r *Reader) Position() Position { return r.pos }

// Advance moves the reader to transaction tx when it is ahead: the caller
// knows the log holds no row from the reader's position up to tx (the
// horizon of a TailEnd whose last row is behind the position). It does
// nothing while rows are held.
func (r *Reader) Advance(tx uint64) {
	if tx > r.pos.Tx && r.head == len(r.buf) {
		r.pos = Position{Tx: tx}
	}
}

// Next returns the next whole transaction, or nil when the tail has
// nothing more for now. The events' rows are valid until the next call.
func (r *Reader) Next(ctx context.Context) (*Transaction, error) {
	for {
		if n, ok := r.complete(); ok {
			return r.take(n), nil
		}
		if r.head == len(r.buf) && r.drained {
			r.drained = false
			return nil, nil
		}
		from := r.log.CursorBefore(r.pos.Tx)
		if r.head < len(r.buf) {
			from = r.after
		}
		page, err := r.log.Tail(ctx, from, r.page)
		if err != nil {
			return nil, fmt.Errorf("reading the log tail from transaction %d: %w", r.pos.Tx, err)
		}
		// Keep only the rows still to assemble before adding the page's:
		// at most one unfinished transaction.
		n := copy(r.buf, r.buf[r.head:])
		clear(r.buf[n:])
		r.buf, r.head = append(r.buf[:n], page.Operations...), 0
		r.after = page.Next
		r.drained = len(page.Operations) < r.page
	}
}

// complete reports the length of the first transaction in buf when all of
// its rows are there: another transaction follows it, or the tail had no
// more rows.
func (r *Reader) complete() (int, bool) {
	rows := r.buf[r.head:]
	if len(rows) == 0 {
		return 0, false
	}
	n := 1
	for n < len(rows) && rows[n].TxID == rows[0].TxID {
		n++
	}
	return n, n < len(rows) || r.drained
}

// take assembles the first n held rows, one transaction, and moves past it.
func (r *Reader) take(n int) *Transaction {
	rows := r.buf[r.head : r.head+n]
	r.head += n
	tx := rows[0].TxID
	t := &Transaction{Tx: tx, Events: Assemble(tx, rows)}
	if tx == r.pos.Tx {
		t.From = min(r.pos.Done, len(t.Events))
	}
	r.pos = Position{Tx: tx + 1}
	return t
}
