package ctlcli

import (
	"fmt"
	"io"
	"sync"
	"time"

	oplog "github.com/doclog/doclog/log"
)

// progressLine is a progress indicator of one line on standard error,
// redrawn from text every tick: in place on a terminal, as one line per
// tick elsewhere (a log file keeps the history). It reports only what
// text knows; countText and timeText say how far along something is
// without inventing a total.
type progressLine struct {
	w        io.Writer
	terminal bool
	now      func() time.Time
	text     func(now time.Time) string

	mu   sync.Mutex
	last string
	quit chan struct{}
	done chan struct{}
}

// startProgressLine draws text(now) every tick until stop. On a terminal
// the line is redrawn five times a second, elsewhere once every 2s.
func startProgressLine(w io.Writer, text func(now time.Time) string) *progressLine {
	p := &progressLine{w: w, terminal: isTerminal(w), now: time.Now, text: text,
		quit: make(chan struct{}), done: make(chan struct{})}
	tick := 2 * time.Second
	if p.terminal {
		tick = 200 * time.Millisecond
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			p.draw()
			select {
			case <-p.quit:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *progressLine) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := oplog.EscapeText(p.text(p.now()))
	if p.terminal {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.last = line
}

// stop draws the line a last time and ends it, so what follows starts on
// a line of its own. Stopping twice is harmless.
func (p *progressLine) stop() {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
	p.draw()
	if p.terminal {
		fmt.Fprintln(p.w)
	}
}

// countText says how many of unit are done: with a total (total > 0),
// "done/total unit (pct%), rate unit/s, ETA d"; without,
// "done unit in elapsed, rate unit/s". The rate is what was done in
// elapsed (done minus base, the count when elapsed began); the ETA is what
// remains at that rate, unknown while the rate is zero.
func countText(done, total, base int64, unit string, elapsed time.Duration) string {
	var perSec float64
	if elapsed > 0 {
		perSec = float64(done-base) / elapsed.Seconds()
	}
	rate := fmt.Sprintf("%.1f %s/s", perSec, unit)
	if total <= 0 {
		return fmt.Sprintf("%d %s in %s, %s", done, unit, roundDuration(elapsed), rate)
	}
	pct := float64(done) * 100 / float64(total)
	eta := "ETA unknown"
	switch {
	case done >= total:
		eta = "done"
	case perSec > 0:
		eta = "ETA " + roundDuration(time.Duration(float64(total-done)/perSec*float64(time.Second)))
	}
	return fmt.Sprintf("%d/%d %s (%.0f%%), %s, %s", done, total, unit, pct, rate, eta)
}

// timeText says how much of a fixed time has passed: "elapsed of total
// (pct%), left left".
func timeText(elapsed, total time.Duration) string {
	elapsed = min(elapsed, total)
	pct := 100.0
	if total > 0 {
		pct = float64(elapsed) * 100 / float64(total)
	}
	return fmt.Sprintf("%s of %s (%.0f%%), %s left", roundDuration(elapsed), roundDuration(total), pct, roundDuration(total-elapsed))
}

// roundDuration rounds to a tenth of a second under a minute and to the
// second above.
func roundDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
