package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// VerifyResult is what `doclogctl verify` reported.
type VerifyResult struct {
	Ran      bool
	Why      string         // why it did not run, or how it failed
	Findings int            // divergent rows: every finding
	ByKind   map[string]int // findings by kind
	Docs     int
	Ops      int64
	Jobs     int
	Sample   []string // a few findings, for the report
}

// verifyReport is the part of admin.VerifyReport the run reads, decoded from
// `-o json` so the harness depends on the command's contract alone.
type verifyReport struct {
	Complete   bool  `json:"complete"`
	Documents  int   `json:"documents"`
	Operations int64 `json:"operations"`
	Jobs       int   `json:"jobs"`
	Findings   []struct {
		Kind       string `json:"kind"`
		DocumentID string `json:"documentId"`
		JobID      string `json:"jobId"`
		Projector  string `json:"projector"`
		Message    string `json:"message"`
	} `json:"findings"`
}

// Verify runs `doclogctl verify` over the whole log and every projection,
// waiting up to wait for the projections to catch up. Exit 0 is clean, 3 is
// findings; anything else, or no verify command in the binary, is a run that
// proves nothing.
func Verify(ctx context.Context, doclogctl, databaseURL, clickhouseURL string, wait time.Duration) VerifyResult {
	if doclogctl == "" {
		return VerifyResult{Why: "doclogctl did not build"}
	}
	if err := exec.CommandContext(ctx, doclogctl, "verify", "--help").Run(); err != nil {
		return VerifyResult{Why: "this doclogctl has no verify command"}
	}
	cmd := exec.CommandContext(ctx, doclogctl, "verify", "-o", "json",
		"--database-url", databaseURL, "--clickhouse-url", clickhouseURL,
		"--wait", wait.String(), "--timeout", (wait + 5*time.Minute).String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 3) {
		return VerifyResult{Why: fmt.Sprintf("doclogctl verify: %v: %s", err, tail(strings.TrimSpace(stderr.String()), 800))}
	}
	var rep verifyReport
	if derr := json.Unmarshal(stdout.Bytes(), &rep); derr != nil {
		return VerifyResult{Why: fmt.Sprintf("decoding doclogctl verify's report: %v", derr)}
	}
	res := VerifyResult{Ran: rep.Complete, Findings: len(rep.Findings), ByKind: map[string]int{},
		Docs: rep.Documents, Ops: rep.Operations, Jobs: rep.Jobs}
	if !rep.Complete {
		res.Why = "doclogctl verify stopped before the end of the log"
	}
	for _, f := range rep.Findings {
		res.ByKind[f.Kind]++
		if len(res.Sample) < 5 {
			res.Sample = append(res.Sample, fmt.Sprintf("%s %s %s job=%s: %s", f.Kind, f.Projector, f.DocumentID, f.JobID, f.Message))
		}
	}
	return res
}
