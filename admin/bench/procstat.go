package bench

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// procTotals is a process group's CPU time so far and resident memory now.
type procTotals struct {
	at       time.Time
	cpuTicks int64
	rss      int64 // -1: the group's first process is gone
}

// sampleProcesses reads each group's CPU ticks (as the report's CPU counts
// them) and memory: the first process's VmRSS plus the anonymous resident
// memory of the others, so memory they share (a Postgres cluster's shared
// buffers) counts once.
func sampleProcesses(groups []cpuGroup) map[string]procTotals {
	now := time.Now()
	ticks := snapshotCPU(groups)
	out := make(map[string]procTotals, len(groups))
	for _, g := range groups {
		t := procTotals{at: now, cpuTicks: ticks[g.name], rss: -1}
		for i, pid := range g.pids {
			field := "RssAnon:"
			if i == 0 {
				field = "VmRSS:"
			}
			kb, ok := statusField(strconv.Itoa(pid), field)
			switch {
			case i == 0 && !ok:
			case i == 0:
				t.rss = kb << 10
			case t.rss >= 0:
				t.rss += kb << 10
			}
		}
		out[g.name] = t
	}
	return out
}

// processUsage turns two samples into each group's memory at the second
// and cores used between them (NaN when its first process is gone).
func processUsage(groups []cpuGroup, before, after map[string]procTotals) []ProcessUsage {
	out := make([]ProcessUsage, len(groups))
	for i, g := range groups {
		a, b := after[g.name], before[g.name]
		out[i] = ProcessUsage{Name: g.name, RSSBytes: a.rss, CPUCores: math.NaN()}
		if dt := a.at.Sub(b.at).Seconds(); a.rss >= 0 && b.rss >= 0 && dt > 0 && a.cpuTicks >= b.cpuTicks {
			out[i].CPUCores = float64(a.cpuTicks-b.cpuTicks) / clockTicks / dt
		}
	}
	return out
}

// seriesProcessGroups are the processes a series follows: those given, each with
// its children (a Postgres server's backends, counted with their reaped
// time), else the run's own groups, renamed to column names.
func seriesProcessGroups(given []SeriesProcess, run []cpuGroup) []cpuGroup {
	if len(given) > 0 {
		out := make([]cpuGroup, len(given))
		for i, p := range given {
			out[i] = cpuGroup{name: p.Name, pids: append([]int{p.PID}, childrenOf(p.PID)...), reaps: true}
		}
		return out
	}
	out := make([]cpuGroup, len(run))
	seen := map[string]int{}
	for i, g := range run {
		name := columnName(g.name)
		if seen[name]++; seen[name] > 1 {
			name += "_" + strconv.Itoa(seen[name])
		}
		out[i] = cpuGroup{name: name, pids: g.pids, reaps: g.reaps}
	}
	return out
}

var notColumn = regexp.MustCompile(`[^a-z0-9_+-]+`)

// columnName shortens a CPU group's label to a CSV column suffix:
// "doclog serve --roles=executor" to executor, "postgres (all processes
// of the cluster)" to postgres, this process to bench or embedded.
func columnName(label string) string {
	switch {
	case strings.HasPrefix(label, "doclogctl bench --embedded"):
		return "embedded"
	case strings.HasPrefix(label, "doclogctl bench"):
		return "bench"
	}
	if roles, ok := strings.CutPrefix(label, "doclog serve --roles="); ok {
		return notColumn.ReplaceAllString(strings.ReplaceAll(roles, ",", "+"), "_")
	}
	name, _, _ := strings.Cut(label, " ")
	return notColumn.ReplaceAllString(strings.ToLower(name), "_")
}
