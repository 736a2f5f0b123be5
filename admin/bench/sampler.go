package bench

import (
	"context"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/pgproj"
)

// sample is a moment (Unix nanoseconds) at which the document view was
// seen to have applied a stream up to index. Pointer-free, as a job is: a
// long run keeps one per document per change of its index.
type sample struct {
	at    int64
	index int64
}

// sampler keeps, per document, the times its global stream's applied index
// was seen to change. One query per tick covers every document, however
// many jobs are in flight.
type sampler struct {
	mu       sync.Mutex
	timeline [][]sample
	latest   []int64
}

func newSampler(docs int) *sampler {
	s := &sampler{timeline: make([][]sample, docs), latest: make([]int64, docs)}
	for i := range s.latest {
		s.latest[i] = -1
	}
	return s
}

// sample reads the document view every SampleInterval and, unless
// SamplePollOnly, as soon as the view's projector notifies a commit, until
// ctx ends. The time of a sample is when its answer arrived: the view
// reached the index at or before then, so a latency read from it errs long,
// by at most one query after a notified commit (commits notified during a
// query make one sample after it), else by the interval plus one query.
func (r *runner) sample(ctx context.Context) {
	t := time.NewTicker(r.cfg.SampleInterval)
	defer t.Stop()
	committed := make(chan struct{}, 1)
	if !r.cfg.SamplePollOnly {
		var watch sync.WaitGroup
		defer watch.Wait()
		watch.Go(func() {
			pgproj.WatchProgress(ctx, r.store.Pool(), func(projector string) {
				if projector != docview.Name {
					return
				}
				select {
				case committed <- struct{}{}:
				default:
				}
			}, func(err error) {
				r.cfg.Logger.Warn("following the document view's commits failed: sampling by the interval", zap.Error(err))
			})
		})
	}
	for {
		applied, err := r.view.AppliedIndexes(ctx, r.streams)
		r.probes.Add(1)
		at := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.cfg.Logger.Warn("sampling the document view failed", zap.Error(err))
		} else {
			r.samp.mu.Lock()
			for d, k := range r.streams {
				if idx := applied[k]; idx > r.samp.latest[d] {
					r.samp.latest[d] = idx
					r.samp.timeline[d] = append(r.samp.timeline[d], sample{at: at.UnixNano(), index: idx})
				}
			}
			r.samp.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-committed:
		}
	}
}

func (s *sampler) latestIndexes() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.latest...)
}

// reached returns when document d's stream was first seen at index or
// beyond.
func (s *sampler) reached(d int, index int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tl := s.timeline[d]
	i := sort.Search(len(tl), func(i int) bool { return tl[i].index >= index })
	if i == len(tl) {
		return time.Time{}, false
	}
	return time.Unix(0, tl[i].at), true
}
