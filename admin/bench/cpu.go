package bench

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat. Linux
// reports them in USER_HZ, which is 100 on every architecture whatever
// the kernel's own tick rate, so it needs no sysconf (and no cgo).
const clockTicks = 100

// ProcessCPU is the CPU time (user and system, not wall time) a process,
// or a group of them, used over the measured phase.
type ProcessCPU struct {
	Name string `json:"name"`
	PIDs []int  `json:"pids"`
	// Seconds is CPU seconds over the measured phase; MicrosPerOp divides
	// it by the operations submitted.
	Seconds     float64 `json:"seconds"`
	MicrosPerOp float64 `json:"microsPerOp"`
}

// CPU is the CPU the pipeline's processes on this host used over the
// measured phase (submission and drain), from /proc: this process (with
// Embedded, every role and the load generator), the doclog processes of
// the run (separate roles), the Postgres server the run measures (every
// process of its cluster, including the backends that ended during the
// phase) and the Kafka brokers of the seeds that listen on this host.
// Processes on other hosts are not seen.
type CPU struct {
	Processes []ProcessCPU `json:"processes"`
	// Seconds and MicrosPerOp add up every process above.
	Seconds     float64 `json:"seconds"`
	MicrosPerOp float64 `json:"microsPerOp"`
	// WallSeconds is the measured phase's length: Seconds over it is the
	// cores the pipeline kept busy.
	WallSeconds float64 `json:"wallSeconds"`
}

// cpuGroup is a named set of processes whose CPU is counted together.
type cpuGroup struct {
	name string
	pids []int
	// reaps is true for a parent whose reaped children's CPU counts too
	// (the postmaster: backends that end during the phase would vanish
	// otherwise).
	reaps bool
}

// cpuSnapshot is the cumulative CPU ticks of every group at one moment.
type cpuSnapshot map[string]int64

// procStat holds the fields of /proc/<pid>/stat the benchmark reads.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// readProcStat parses /proc/<pid>/stat. The command name is in
// parentheses and may hold spaces and parentheses itself, so the fields
// are counted from the last ')'.
func readProcStat(pid int) (procStat, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(raw[i+1:])) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, false
	}
	var s procStat
	var errs [5]error
	s.ppid, errs[0] = strconv.Atoi(f[1])
	s.utime, errs[1] = strconv.ParseInt(f[11], 10, 64)
	s.stime, errs[2] = strconv.ParseInt(f[12], 10, 64)
	s.cutime, errs[3] = strconv.ParseInt(f[13], 10, 64)
	s.cstime, errs[4] = strconv.ParseInt(f[14], 10, 64)
	for _, err := range errs {
		if err != nil {
			return procStat{}, false
		}
	}
	return s, true
}

// snapshotCPU reads the ticks of every group. A process that ended is
// counted as zero, so a group's delta only ever misses it; the postmaster
// group counts the ended backends through the parent's reaped times.
func snapshotCPU(groups []cpuGroup) cpuSnapshot {
	snap := make(cpuSnapshot, len(groups))
	for _, g := range groups {
		var ticks int64
		for i, pid := range g.pids {
			s, ok := readProcStat(pid)
			if !ok {
				continue
			}
			ticks += s.utime + s.stime
			if g.reaps && i == 0 {
				ticks += s.cutime + s.cstime
			}
		}
		snap[g.name] = ticks
	}
	return snap
}

// cpuReport is the difference of two snapshots, per operation.
func cpuReport(groups []cpuGroup, before, after cpuSnapshot, wallSeconds float64, ops int) *CPU {
	c := &CPU{WallSeconds: wallSeconds}
	for _, g := range groups {
		p := ProcessCPU{Name: g.name, PIDs: g.pids, Seconds: float64(after[g.name]-before[g.name]) / clockTicks}
		c.Seconds += p.Seconds
		if ops > 0 {
			p.MicrosPerOp = p.Seconds * 1e6 / float64(ops)
		}
		c.Processes = append(c.Processes, p)
	}
	if ops > 0 {
		c.MicrosPerOp = c.Seconds * 1e6 / float64(ops)
	}
	return c
}

// cpuGroups finds the processes to account: this one, with doclog the
// run's doclog processes (those whose topics prefix is the run's, or every
// doclog process when the run has none), the Postgres cluster of the backend
// postgresPID (0: unknown) and the processes listening on the local
// ports of the Kafka seeds.
func cpuGroups(self string, doclog bool, topicPrefix string, postgresPID int, seeds []string) []cpuGroup {
	groups := []cpuGroup{{name: self, pids: []int{os.Getpid()}}}
	if doclog {
		for _, p := range doclogProcesses(topicPrefix) {
			groups = append(groups, cpuGroup{name: p.label, pids: []int{p.pid}})
		}
	}
	if postgresPID > 0 {
		if s, ok := readProcStat(postgresPID); ok && s.ppid > 1 {
			// The backend's parent is the postmaster; its children are the
			// backends and the background processes of the cluster.
			pids := append([]int{s.ppid}, childrenOf(s.ppid)...)
			groups = append(groups, cpuGroup{name: "postgres (all processes of the cluster)", pids: pids, reaps: true})
		}
	}
	var brokers []int
	for _, seed := range seeds {
		_, port, err := net.SplitHostPort(seed)
		if err != nil || !localHost(seed) {
			continue
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			continue
		}
		for _, pid := range listeners(n) {
			if !slices.Contains(brokers, pid) {
				brokers = append(brokers, pid)
			}
		}
	}
	if len(brokers) > 0 {
		groups = append(groups, cpuGroup{name: "kafka broker", pids: brokers})
	}
	return groups
}

// localHost reports whether a seed's host is this machine by a loopback
// name or one of this host's addresses.
func localHost(seed string) bool {
	host, _, _ := net.SplitHostPort(seed)
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

type doclogProcess struct {
	pid   int
	label string
	args  []string
}

// doclogProcesses lists the processes named doclog on this host whose
// topics prefix (DOCLOG_TOPICS_PREFIX, or --topics-prefix) is prefix, or
// all of them when prefix is empty: other doclogs on the host (another
// run, a test) are not the run's.
func doclogProcesses(prefix string) []doclogProcess {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []doclogProcess
	for _, dir := range dirs {
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "doclog" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if prefix != "" && processPrefix(dir, args) != prefix {
			continue
		}
		out = append(out, doclogProcess{pid: pid, label: processLabel(args), args: args})
	}
	return out
}

// processPrefix is a doclog process's topics prefix: the flag's, else the
// environment's.
func processPrefix(dir string, args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--topics-prefix="); ok {
			return v
		}
		if a == "--topics-prefix" && i+1 < len(args) {
			return args[i+1]
		}
	}
	env, _ := os.ReadFile(filepath.Join(dir, "environ"))
	for kv := range strings.SplitSeq(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "DOCLOG_TOPICS_PREFIX="); ok {
			return v
		}
	}
	return ""
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, dir := range dirs {
		child, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		if s, ok := readProcStat(child); ok && s.ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// listeners finds the processes holding a listening TCP socket on port:
// the socket's inode from /proc/net/tcp{,6}, then the process whose file
// descriptors include it (only processes of this user can be read).
func listeners(port int) []int {
	inodes := map[string]bool{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, dir := range dirs {
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && inodes[link] {
				pid, _ := strconv.Atoi(filepath.Base(dir))
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
