package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config is one run.
type Config struct {
	Seed    uint64
	Profile Profile
	Rate    float64 // jobs per second the load aims at
	Workers int     // concurrent submits, retries included
	// SyncDrivers is how many replica documents load jobs write, and how
	// many documents have branches forked and promoted, each document by a
	// driver of its own (Sync); 0 for DefaultSyncDrivers.
	SyncDrivers int
	// DrainLimit fails the run when the last acknowledged job settles later
	// than this after the last fault; Settle is how long the run waits for
	// that at all.
	DrainLimit, Settle time.Duration
	VerifyWait         time.Duration // how long verify lets the projections catch up
	Dir                string        // logs, binaries and the services' data; "" for a temporary one
	ClickHouseAddr     string        // a running server to use; "" to start one
	// Source is the checkout doclog is built from, "" for this one: a
	// worktree of an older commit shows what the run finds there. doclogctl
	// always comes from this checkout, for its verify.
	Source string
	// MemberEnv is added to every member's environment, after the run's
	// own settings: KEY=VALUE settings of doclog serve, to put a mode that
	// is not the default (DOCLOG_EXECUTOR_ASYNC_ANNOUNCE=true) through the
	// faults.
	MemberEnv []string
	Logf      func(string, ...any)
}

// DefaultSyncDrivers is Config.SyncDrivers unless given: enough documents
// that every kind of sync job happens many times in the short run too.
const DefaultSyncDrivers = 6

// Run starts the services and the fleet, runs the load and the faults, then
// checks and reports. An error means the run could not be carried out; a run
// that found problems returns them in the report's Failures.
func Run(ctx context.Context, c Config) (*Report, error) {
	logf := c.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := c.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "doclog-chaos-"); err != nil {
			return nil, fmt.Errorf("making the run directory: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the run directory: %w", err)
	}
	logf("run directory %s", dir)
	src := c.Source
	if src == "" {
		src = root
	}
	doclog, doclogctl, err := build(ctx, src, root, dir, logf)
	if err != nil {
		return nil, err
	}

	pgProxy, err := ListenProxy()
	if err != nil {
		return nil, err
	}
	defer pgProxy.Close()
	brokerProxy, err := ListenProxy()
	if err != nil {
		return nil, err
	}
	defer brokerProxy.Close()

	logf("starting Kafka, Postgres (fsync on) and ClickHouse")
	svc, err := StartServices(ctx, root, dir, brokerProxy.Addr(), c.ClickHouseAddr)
	if err != nil {
		return nil, err
	}
	defer svc.Stop()
	brokerProxy.Serve(svc.KafkaProxied)
	pgAddr, proxiedDB, err := viaProxy(svc.DatabaseURL, pgProxy.Addr())
	if err != nil {
		return nil, err
	}
	pgProxy.Serve(pgAddr)
	chDB := fmt.Sprintf("chaos_%d_%d", c.Seed, time.Now().UnixNano())
	defer dropClickHouse(svc.ClickHouseAddr, chDB)
	chURL := "clickhouse://" + svc.ClickHouseAddr + "/" + chDB

	fleet, members, err := newFleet(doclog, dir, svc, proxiedDB, brokerProxy.Addr(), chURL+"?create_database=true", c.MemberEnv, logf)
	if err != nil {
		return nil, err
	}
	defer fleet.StopAll(20 * time.Second)
	logf("starting the fleet")
	for _, m := range members {
		if m.Name == "executor-3" {
			continue
		}
		if err := m.Start(); err != nil {
			return nil, err
		}
	}
	for _, m := range members {
		if m.Name == "executor-3" {
			continue
		}
		if err := m.WaitReady(ctx, 2*time.Minute); err != nil {
			return nil, err
		}
	}

	pool, err := pgxpool.New(ctx, svc.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to the run's Postgres: %w", err)
	}
	defer pool.Close()

	faults := c.Profile.Schedule(c.Seed)
	for _, f := range faults {
		logf("scheduled %s", f)
	}
	ingestURL := "http://" + members[0].APIAddr
	ledger := NewLedger()
	load := &Load{URL: ingestURL, Rate: c.Rate, Workers: c.Workers, Seed: c.Seed, Ledger: ledger}
	stop, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	deadline, endLoad := context.WithCancel(ctx)
	defer endLoad()
	syncLoad := &Sync{Load: load, ReadURL: "http://" + members[len(members)-1].APIAddr,
		Replicas: cmp.Or(c.SyncDrivers, DefaultSyncDrivers), Branched: cmp.Or(c.SyncDrivers, DefaultSyncDrivers), Pause: 100 * time.Millisecond}
	var loadDone sync.WaitGroup
	loadDone.Add(2)
	go func() { defer loadDone.Done(); load.Run(stop, deadline) }()
	go func() { defer loadDone.Done(); syncLoad.Run(stop, deadline) }()

	start := time.Now()
	logf("load at %.0f jobs/s, %d faults over %s", c.Rate, len(faults), c.Profile.Warmup+c.Profile.Spread)
	injector := &Injector{Members: byName(members), Services: svc, PGProxy: pgProxy, BrokerPx: brokerProxy}
	injected := injector.RunSchedule(ctx, start, faults, logf)
	lastFault := time.Now()
	if n := len(injected); n > 0 {
		lastFault = injected[n-1].End
	}
	stopLoad()
	// Submits still in flight may retry a little longer: their jobs are
	// acknowledged or abandoned, never left half known.
	time.AfterFunc(15*time.Second, endLoad)
	loadDone.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("the run was cancelled: %w", err)
	}
	entries := ledger.Entries()
	logf("load stopped: %d jobs acknowledged; waiting for their results", len(entries))

	settledAt, last, left := Drain(ctx, pool, entries, lastFault.Add(c.Settle))
	logf("drain: %s after the last fault, %d without a result", settledAt.Sub(lastFault).Round(time.Millisecond), len(left))
	outcomes, err := CheckLedger(ctx, ingestURL, pool, entries)
	if err != nil {
		return nil, err
	}
	records, dupJobs, err := JobRecords(ctx, svc.KafkaSeeds, "doclog.jobs")
	if err != nil {
		logf("counting the jobs topic's records: %v", err)
	}
	logf("running doclogctl verify")
	v := Verify(ctx, doclogctl, svc.DatabaseURL, chURL, c.VerifyWait)

	st := load.Stats()
	bal := CheckBalances(ctx, "http://"+members[len(members)-1].APIAddr, outcomes, st.Abandoned == 0)

	r := NewReport(c.Seed, outcomes)
	r.Balances = bal
	r.Sync = CheckSync(outcomes, ledger.Notes())
	r.Load, r.Faults, r.Verify, r.Dir = st, injected, v, dir
	r.Drained, r.Drain, r.DrainLimit = len(left) == 0, max(0, settledAt.Sub(lastFault)), c.DrainLimit
	r.Exits = fleet.Exits()
	r.LastFault, r.LastSettled = lastFault, lastSettled(entries, last)
	r.TopicRecords, r.TopicDupJobs = records, dupJobs
	return r, nil
}

// lastSettled picks the entries of the jobs that settled last.
func lastSettled(entries []Entry, ids []string) []Entry {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []Entry
	for _, e := range entries {
		if want[e.JobID] {
			out = append(out, e)
		}
	}
	return out
}

// build compiles doclog and doclogctl once for the whole run. A doclogctl
// that does not build leaves the run without verify, which the report says.
func build(ctx context.Context, src, root, dir string, logf func(string, ...any)) (doclog, doclogctl string, err error) {
	bin := filepath.Join(dir, "bin")
	doclog, doclogctl = filepath.Join(bin, "doclog"), filepath.Join(bin, "doclogctl")
	logf("building doclog and doclogctl")
	goBuild := func(in, out, pkg string) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Dir = in
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w: %s", pkg, err, b)
		}
		return nil
	}
	if err := goBuild(src, doclog, "./cmd/doclog"); err != nil {
		return "", "", err
	}
	if err := goBuild(root, doclogctl, "./cmd/doclogctl"); err != nil {
		logf("doclogctl does not build, so verify cannot run: %v", err)
		doclogctl = ""
	}
	return doclog, doclogctl, nil
}

// newFleet lays out the members: executor-2 reaches Postgres and projectors-2
// the broker through the proxies the cuts use.
func newFleet(binary, dir string, svc *Services, proxiedDB, brokerProxy, chURL string, memberEnv []string, logf func(string, ...any)) (*Fleet, []*Member, error) {
	base := []string{
		"DOCLOG_DATABASE_URL=" + svc.DatabaseURL,
		"DOCLOG_KAFKA_SEEDS=" + svc.KafkaSeeds,
		"DOCLOG_CLICKHOUSE_URL=" + chURL,
		"DOCLOG_PROJECTORS=docview,indexer,analytics",
		"DOCLOG_MIGRATE=auto",
	}
	base = append(base, memberEnv...)
	fleet := NewFleet(binary, dir, base, logf)
	var members []*Member
	add := func(role string, n int, api bool, env ...string) error {
		m := &Member{Name: fmt.Sprintf("%s-%d", role, n), Role: role}
		var err error
		if m.OpsAddr, err = freeAddr(); err != nil {
			return err
		}
		m.Env = append(env, "DOCLOG_OPS_ADDR="+m.OpsAddr)
		if api {
			if m.APIAddr, err = freeAddr(); err != nil {
				return err
			}
			m.Env = append(m.Env, "DOCLOG_HTTP_ADDR="+m.APIAddr)
		} else {
			// Static membership: the same name across restarts, so the
			// group hands a restarted member its partitions back at once.
			m.Env = append(m.Env, "DOCLOG_MEMBER_NAME="+m.Name)
		}
		members = append(members, fleet.Add(m))
		return nil
	}
	err := errors.Join(
		add("ingest", 1, true),
		add("executor", 1, false),
		add("executor", 2, false, "DOCLOG_DATABASE_URL="+proxiedDB),
		add("executor", 3, false),
		add("projectors", 1, false),
		add("projectors", 2, false, "DOCLOG_KAFKA_SEEDS="+brokerProxy),
		add("readstore", 1, true),
	)
	if err != nil {
		return nil, nil, err
	}
	return fleet, members, nil
}

func byName(ms []*Member) map[string]*Member {
	out := map[string]*Member{}
	for _, m := range ms {
		out[m.Name] = m
	}
	return out
}

// freeAddr picks a loopback port nothing listens on. A member binds it a
// moment later and again at every restart, so the load and the probes keep
// one address per member.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// viaProxy returns Postgres's address and the URL that reaches it through
// the proxy at proxyAddr.
func viaProxy(databaseURL, proxyAddr string) (string, string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", "", fmt.Errorf("parsing the database URL: %w", err)
	}
	target := u.Host
	u.Host = proxyAddr
	return target, u.String(), nil
}

// dropClickHouse removes the run's analytics database, which matters on a
// shared server.
func dropClickHouse(addr, database string) {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+database)
}
