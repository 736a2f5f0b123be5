package admin

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Settling: the comparisons of the projections, which lag the log, and
// their repetition while VerifyConfig.Wait lasts.

// compareGlobal runs the comparisons that are not per document: the
// analytics tables and the quarantines.
func (v *verifier) compareGlobal(ctx context.Context) error {
	if a := v.cfg.Analytics; a != nil {
		v.progress(a.Name())
		fs, err := compareAnalytics(ctx, a, v.figures, v.inRange)
		if err != nil {
			return err
		}
		v.analytics = fs
	}
	v.progress("quarantines")
	fs, err := v.listQuarantines(ctx)
	if err != nil {
		return err
	}
	v.quarantines = fs
	return nil
}

// inRange reports whether the walk verified the document (an analytics row
// of a document outside the range is none of this run's business).
func (v *verifier) inRange(id string) bool {
	return id > v.cfg.From && (v.walked || id <= v.rep.Next)
}

// settle compares the projections again while any differs and Wait lasts:
// projectors lag the log, so only a difference that persists counts.
func (v *verifier) settle(ctx context.Context) error {
	deadline := time.Now().Add(v.cfg.Wait)
	for {
		pending := v.pendingDocuments()
		if len(pending) == 0 && !hasProjection(v.analytics) && len(v.quarantines) == 0 {
			return nil
		}
		if time.Now().Add(v.cfg.RetryInterval).After(deadline) {
			return nil
		}
		v.progress(fmt.Sprintf("settling (attempt %d)", v.rep.Attempts+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(v.cfg.RetryInterval):
		}
		if len(pending) > 0 {
			heads, err := v.cfg.Store.Heads(ctx, pending)
			if err != nil {
				return fmt.Errorf("verifying the log: %w", err)
			}
			for _, id := range pending {
				res, err := v.verifyDocument(ctx, id, branchesOf(heads, id))
				if err != nil {
					return err
				}
				v.record(id, res)
			}
		}
		if err := v.compareGlobal(ctx); err != nil {
			return err
		}
		v.rep.Attempts++
	}
}

func (v *verifier) pendingDocuments() []string {
	var out []string
	for _, id := range v.order {
		if d, ok := v.docs[id]; ok && hasProjection(d.findings) {
			out = append(out, id)
		}
	}
	return out
}

func hasProjection(fs []Finding) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Kind.projection() })
}
