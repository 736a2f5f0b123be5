package executor

import (
	"go.uber.org/zap"

	"github.com/doclog/doclog/record"
)

// SignatureVerifier checks the signatures of a job's actions under its
// document type's policy (package signing's Verifier). Its error fails the
// job; the error's name (SIGNATURE_INVALID) classifies it.
type SignatureVerifier interface {
	VerifyJob(j *record.Job) error
}

// verifySignatures decides a job's signatures as it is admitted, before
// anything of it is reduced or stored: a refused one fails the job, which
// then settles FAILED under its document's head guard like any decided
// failure, writing no operation, while the partition goes on. The check is
// the executor's because records reach the topic without ingest too.
func (e *Executor) verifySignatures(p *pending) {
	if e.cfg.Signatures == nil || p.job == nil {
		return
	}
	if err := e.cfg.Signatures.VerifyJob(p.job); err != nil {
		p.fail = err
		e.log.Info("job refused: signature invalid", zap.String("job_id", p.job.JobID),
			zap.String("document_id", p.job.DocumentID), zap.Error(err))
	}
}
