package testenv

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// KafkaNode is a broker of the test's own, run by scripts/kafka.sh, so the
// test can stop it and start it again without disturbing other tests. It
// keeps its storage and its port across Stop and Start, so clients
// configured with Seeds find it again.
type KafkaNode struct {
	// Seeds reach the broker.
	Seeds  []string
	t      testing.TB
	script string
	dir    string
}

// StartKafkaNode starts a broker in a directory of the test's and stops it
// when the test ends.
func StartKafkaNode(t testing.TB) *KafkaNode {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		t.Fatalf("find the repository root with `go env GOMOD`: %v", err)
	}
	n := &KafkaNode{t: t, script: filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "scripts", "kafka.sh"), dir: filepath.Join(t.TempDir(), "kafka")}
	out, err := exec.Command(n.script, "start", n.dir).Output()
	if err != nil {
		t.Fatalf("scripts/kafka.sh start: %v (is Java installed? see `scripts/kafka.sh install`)", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, EnvKafkaSeeds+"="); ok {
			n.Seeds = strings.Split(s, ",")
		}
	}
	if len(n.Seeds) == 0 {
		t.Fatalf("scripts/kafka.sh start printed no %s: %s", EnvKafkaSeeds, out)
	}
	t.Cleanup(n.Stop)
	return n
}

// Stop stops the broker; stopping a stopped one is harmless.
func (n *KafkaNode) Stop() {
	if out, err := exec.Command(n.script, "stop", n.dir).CombinedOutput(); err != nil {
		n.t.Errorf("scripts/kafka.sh stop: %v: %s", err, out)
	}
}

// Start starts the stopped broker again on its storage and port, and
// returns once it serves metadata.
func (n *KafkaNode) Start() {
	n.t.Helper()
	if out, err := exec.Command(n.script, "restart", n.dir).CombinedOutput(); err != nil {
		n.t.Fatalf("scripts/kafka.sh restart: %v: %s", err, out)
	}
}
