package model

import (
	"strconv"

	"github.com/google/uuid"
)

// OpID is the identity of a job's n-th action (0-based): UUIDv5 in the URL
// namespace of "urn:doclog:op:<jobId>:<n>". Deriving it from the job rather
// than drawing it at random is what makes a re-run job write the same
// identities, so the log can recognise it as a replay.
func OpID(jobID string, n int) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:doclog:op:"+jobID+":"+strconv.Itoa(n))).String()
}

// JobIDFromIdempotencyKey is the job id of a submission carrying an
// Idempotency-Key: UUIDv5 in the URL namespace of "urn:doclog:job:<key>", so
// a client's retry is the same job.
func JobIDFromIdempotencyKey(key string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:doclog:job:"+key)).String()
}
