package bench

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessRSS is the peak resident set of one process, from /proc's VmHWM:
// the high-water mark since the process started, not only during the run.
type ProcessRSS struct {
	PID       int    `json:"pid"`
	Name      string `json:"name"`
	Command   string `json:"command"`
	PeakBytes int64  `json:"peakBytes"`
}

// embeddedRSS is this process's peak: the roles and the load generator
// together.
func embeddedRSS() []ProcessRSS {
	peak, ok := vmHWM("self")
	if !ok {
		return nil
	}
	return []ProcessRSS{{PID: os.Getpid(), Name: "doclogctl bench --embedded", Command: strings.Join(os.Args, " "), PeakBytes: peak}}
}

// doclogRSS is the peak of every process on this host named doclog (each
// role, when they run as separate processes); none when doclog runs
// elsewhere.
func doclogRSS() []ProcessRSS {
	var out []ProcessRSS
	for _, p := range doclogProcesses("") {
		if peak, ok := vmHWM(strconv.Itoa(p.pid)); ok {
			out = append(out, ProcessRSS{PID: p.pid, Name: p.label, PeakBytes: peak, Command: strings.Join(p.args, " ")})
		}
	}
	return out
}

// processLabel names a doclog process by its command and roles, e.g.
// "doclog serve --roles=executor", so separate roles read apart.
func processLabel(args []string) string {
	label := "doclog"
	for i, a := range args {
		switch {
		case i == 1 && !strings.HasPrefix(a, "-"):
			label += " " + a
		case strings.HasPrefix(a, "--roles="):
			label += " " + a
		case a == "--roles" && i+1 < len(args):
			label += " --roles=" + args[i+1]
		}
	}
	return label
}

// vmHWM reads the peak resident set of /proc/<pid>/status, in bytes.
func vmHWM(pid string) (int64, bool) {
	kb, ok := statusField(pid, "VmHWM:")
	return kb << 10, ok
}

// statusField reads a "Name:   123 kB" line of /proc/<pid>/status, in kB.
func statusField(pid, field string) (int64, bool) {
	f, err := os.Open(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			fields := strings.Fields(v)
			if len(fields) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}
