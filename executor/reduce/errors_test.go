package reduce

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

func TestFailureClassification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		name string
		typ  record.ErrorType
	}{
		{&model.InvalidInput{Reason: "x"}, model.NameInvalidInput, record.ErrInvalidAction},
		{&model.UnknownActionType{DocumentType: "t"}, model.NameUnknownActionType, record.ErrInvalidAction},
		{fmt.Errorf("waited: %w", &model.ModelNotFound{DocumentType: "t"}), model.NameModelNotFound, record.ErrUnknownDocumentType},
		{&model.DocumentNotFound{}, model.NameDocumentNotFound, record.ErrDocumentNotFound},
		{&model.DocumentExists{}, model.NameDocumentExists, record.ErrDocumentExists},
		{&model.DocumentDeleted{}, model.NameDocumentDeleted, record.ErrDocumentDeleted},
		{model.Violation("overdraft", "no"), model.NameBusinessRuleViolation, record.ErrReducer},
		{&model.ReducerError{Err: errors.New("bad")}, model.NameReducerError, record.ErrReducer},
		{&model.ReducerError{Panic: true, Err: errors.New("boom")}, model.NameReducerError, record.ErrReducerPanic},
		{&DependencyFailedError{Dependency: "j"}, NameDependencyFailed, record.ErrDependencyFailed},
		{&JobTimeoutError{Reason: "r"}, NameJobTimeout, record.ErrTimeout},
		{&ConflictBudgetExhaustedError{Conflicts: 3, Last: &oplog.RevisionMismatch{}}, NameConflictBudgetExhausted, record.ErrConflictBudgetExhausted},
		{&RetriesExhaustedError{Attempts: 3, Last: errors.New("flaky")}, NameRetriesExhausted, record.ErrRetriesExhausted},
		{&DocumentTypeMismatchError{}, NameDocumentTypeMismatch, record.ErrInvalidAction},
		{errors.New("plain"), NameError, record.ErrUnclassified},
	} {
		info := ErrorInfo(tc.err)
		require.Equal(t, tc.name, info.Name, "%v", tc.err)
		require.Equal(t, tc.err.Error(), info.Message)
		require.Equal(t, tc.typ, FailureType(info), "%v", tc.err)
	}
	// An operator's cancellation is written by doclogctl, not by an error
	// of the executor's: its name alone classifies it.
	require.Equal(t, record.ErrCancelled, FailureType(oplog.ErrorInfo{Name: NameCancelled, Message: "cancelled by an operator"}))
	require.Equal(t, record.ErrSignatureInvalid, FailureType(oplog.ErrorInfo{Name: "SIGNATURE_INVALID", Message: "actions[0]: no signature"}))
	// Causes keep their names across the boundary.
	info := ErrorInfo(&RetriesExhaustedError{Attempts: 2, Last: &model.HashMismatch{}})
	require.NotNil(t, info.Cause)
	require.Equal(t, model.NameHashMismatch, info.Cause.Name)
}

// Every named error of doclog reports its documented name through the one
// lookup, bare and wrapped, since the names are stored in job results and dead
// letters and must read the same whichever package's error carried them.
func TestEveryNamedErrorReportsItsName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  oplog.Named
		name string
	}{
		{&oplog.RevisionMismatch{}, "RevisionMismatch"},
		{&oplog.AppendConditionFailed{}, "AppendConditionFailed"},
		{&oplog.DuplicateOperation{}, "DuplicateOperation"},
		{&oplog.InvalidRequest{}, "InvalidRequest"},
		{&oplog.JobAlreadySettled{}, "JobAlreadySettled"},

		{&model.InvalidInput{}, "InvalidInput"},
		{&model.UnknownActionType{}, "UnknownActionType"},
		{&model.ModelNotFound{}, "ModelNotFound"},
		{&model.DocumentNotFound{}, "DocumentNotFound"},
		{&model.DocumentExists{}, "DocumentExists"},
		{&model.DocumentDeleted{}, "DocumentDeleted"},
		{&model.ReducerError{Err: fmt.Errorf("bad")}, "ReducerError"},
		{&model.BusinessRuleViolation{}, "BusinessRuleViolation"},
		{&model.HashMismatch{}, "HashMismatch"},
		{&model.MissingUpgradeTransition{}, "MissingUpgradeTransition"},
		{&model.DowngradeNotSupported{}, "DowngradeNotSupported"},
		{&model.StreamGap{}, "StreamGap"},
		{&model.SkipBeforeStart{}, "SkipBeforeStart"},

		{&record.DecodeError{}, "DecodeError"},

		{&RetriesExhaustedError{Last: fmt.Errorf("flaky")}, "RetriesExhausted"},
		{&ConflictBudgetExhaustedError{Last: &oplog.RevisionMismatch{}}, "ConflictBudgetExhausted"},
		{&JobTimeoutError{}, "JobTimeout"},
		{&DependencyFailedError{}, "DependencyFailed"},
		{&DocumentTypeMismatchError{}, "DocumentTypeMismatch"},
	} {
		require.Equal(t, tc.name, tc.err.Name(), "%T", tc.err)
		for _, err := range []error{tc.err, fmt.Errorf("context: %w", tc.err), fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", tc.err))} {
			require.Equal(t, tc.name, oplog.ErrorName(err), "%T: %v", tc.err, err)
			require.Equal(t, tc.name, model.ErrorName(err), "%T: %v", tc.err, err)
			require.Equal(t, tc.name, ErrorInfo(err).Name, "%T: %v", tc.err, err)
		}
	}
	// An error without a name has none, and the outermost name wins.
	require.Empty(t, oplog.ErrorName(fmt.Errorf("plain")))
	require.Empty(t, oplog.ErrorName(&oplog.Unavailable{Err: fmt.Errorf("down")}))
	require.Equal(t, NameError, ErrorInfo(fmt.Errorf("plain")).Name)
	require.Equal(t, NameRetriesExhausted, oplog.ErrorName(&RetriesExhaustedError{Last: &model.HashMismatch{}}))
}
