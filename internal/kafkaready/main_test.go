package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// The test broker is one node: waiting for one broker succeeds, waiting for
// three (a cluster's probe, -brokers 3) keeps waiting and times out saying
// how many the metadata lists.
func TestWaitCountsBrokers(t *testing.T) {
	seeds := testenv.KafkaSeeds(t)
	require.NoError(t, wait(seeds, 30*time.Second, []int{os.Getpid()}, 1))

	err := wait(seeds, 3*time.Second, nil, 3)
	require.ErrorContains(t, err, "metadata lists 1 of 3 brokers")
}

// A watched process that has exited ends the wait at once.
func TestWaitGivesUpOnExitedProcess(t *testing.T) {
	err := wait([]string{testenv.UnusedAddr(t)}, 30*time.Second, []int{os.Getpid(), 1 << 22}, 1)
	require.ErrorContains(t, err, "exited")
}
