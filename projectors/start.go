package projectors

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StartPosition is where a projector starts reading a write-ready
// partition it has no checkpoint for: the start of the topic (the zero
// value, and the default), its end (now), or the first record written at or
// after a time. A partition with a checkpoint always resumes from it.
//
// Starting anywhere but the beginning changes what the projection holds: a
// document appears when a record of it comes (the runner then heals its
// streams from index 0 of the log, so what it holds of a document is always
// whole and verified), and the reconciler compares only documents the
// projector holds, so documents nobody touched since the start stay absent.
// A read model whose readers expect every document (FullHistory) refuses it.
// Setting the start back to the beginning later makes the next reconciler
// pass bring in the rest of the log.
type StartPosition struct {
	latest bool
	at     time.Time
}

// StartLatest starts at the end of the topic: records written from then on.
var StartLatest = StartPosition{latest: true}

// StartAt starts at the first record written at or after t (the end of the
// topic when none is).
func StartAt(t time.Time) StartPosition { return StartPosition{at: t} }

// ParseStartPosition reads "earliest" (or ""), "latest", or an RFC 3339
// time.
func ParseStartPosition(s string) (StartPosition, error) {
	switch s {
	case "", "earliest":
		return StartPosition{}, nil
	case "latest":
		return StartLatest, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return StartPosition{}, fmt.Errorf("a start position is earliest, latest or an RFC 3339 time (2026-01-02T15:04:05Z), not %q", s)
	}
	return StartAt(t), nil
}

// Earliest reports whether it is the start of the topic.
func (p StartPosition) Earliest() bool { return !p.latest && p.at.IsZero() }

// String is the form ParseStartPosition reads.
func (p StartPosition) String() string {
	switch {
	case p.latest:
		return "latest"
	case p.at.IsZero():
		return "earliest"
	}
	return p.at.UTC().Format(time.RFC3339Nano)
}

// FullHistory is implemented by projectors whose readers expect every
// document of the log (docview, indexer): they must start at the beginning
// of the log, and Config.Validate refuses another StartPosition for them.
type FullHistory interface {
	// FullHistory reports whether the projector needs every document.
	FullHistory() bool
}

func needsFullHistory(p Projector) bool {
	f, ok := p.(FullHistory)
	return ok && f.FullHistory()
}

// startOffset resolves where a partition without a checkpoint starts and
// stores that offset as its checkpoint (fenced by the epoch just taken), so
// a restart before the first batch resumes there rather than at a later
// "latest". The start of the topic needs no lookup nor storing.
func (r *Runner) startOffset(ctx context.Context, p int32, epoch int64) (kgo.Offset, error) {
	if r.cfg.Start.Earliest() {
		return kgo.NewOffset().AtStart(), nil
	}
	adm := kadm.NewClient(r.cl)
	var listed kadm.ListedOffsets
	err := r.retry(ctx, "assign", func() error {
		var err error
		if r.cfg.Start.latest {
			listed, err = adm.ListEndOffsets(ctx, r.cfg.Topic)
		} else {
			listed, err = adm.ListOffsetsAfterMilli(ctx, r.cfg.Start.at.UnixMilli(), r.cfg.Topic)
		}
		if err == nil {
			err = listed.Error()
		}
		return err
	})
	if err != nil {
		return kgo.Offset{}, fmt.Errorf("projector %s: find the %s offset of partition %d: %w", r.name, r.cfg.Start, p, err)
	}
	o, ok := listed.Lookup(r.cfg.Topic, p)
	if !ok {
		return kgo.Offset{}, fmt.Errorf("projector %s: no %s offset for partition %d of %s", r.name, r.cfg.Start, p, r.cfg.Topic)
	}
	err = r.retry(ctx, "assign", func() error {
		return r.cfg.Store.InTx(ctx, []Fence{{Projector: r.name, Partition: p, Epoch: epoch, NextOffset: o.Offset}}, func(Tx) error { return nil })
	})
	if err != nil {
		return kgo.Offset{}, fmt.Errorf("projector %s: store the start of partition %d: %w", r.name, p, err)
	}
	return kgo.NewOffset().At(o.Offset).WithEpoch(-1), nil
}
