package hostpath

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The kinds of failure the decisions return. Callers test them with
// errors.Is; the gRPC handlers turn each into the CSI status code named
// beside it.
var (
	// ErrInvalid: a request field is missing or has a value the driver does
	// not accept (INVALID_ARGUMENT).
	ErrInvalid = errors.New("invalid argument")
	// ErrNotFound: the volume, the node or the path does not exist
	// (NOT_FOUND).
	ErrNotFound = errors.New("not found")
	// ErrExists: the object exists with arguments other than the request's
	// (ALREADY_EXISTS).
	ErrExists = errors.New("already exists with other arguments")
	// ErrPrecondition: the request conflicts with the volume's current use,
	// e.g. a single-node volume published to another node
	// (FAILED_PRECONDITION).
	ErrPrecondition = errors.New("failed precondition")
	// ErrExhausted: a limit is reached, e.g. the node's volume count or the
	// configured capacity (RESOURCE_EXHAUSTED).
	ErrExhausted = errors.New("resource exhausted")
	// ErrOutOfRange: the capacity range cannot be satisfied at all
	// (OUT_OF_RANGE).
	ErrOutOfRange = errors.New("out of range")
	// ErrBadToken: a ListVolumes starting token the driver never issued
	// (ABORTED).
	ErrBadToken = errors.New("invalid starting token")
)

// kindError is a failure of one kind with a message for the user.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// fail returns an error of kind whose message is the formatted text.
func fail(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

var kindCodes = []struct {
	kind error
	code codes.Code
}{
	{ErrInvalid, codes.InvalidArgument},
	{ErrNotFound, codes.NotFound},
	{ErrExists, codes.AlreadyExists},
	{ErrPrecondition, codes.FailedPrecondition},
	{ErrExhausted, codes.ResourceExhausted},
	{ErrOutOfRange, codes.OutOfRange},
	{ErrBadToken, codes.Aborted},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

// toStatus turns err into a gRPC status error: a status error stays as it
// is, a kind maps to its code, anything else is INTERNAL. nil stays nil.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, kc := range kindCodes {
		if errors.Is(err, kc.kind) {
			return status.Error(kc.code, err.Error())
		}
	}
	return status.Error(codes.Internal, err.Error())
}
