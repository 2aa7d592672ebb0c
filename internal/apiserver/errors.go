package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/storage"
)

// storageError maps a storage sentinel error to the API error a client of
// resource gr named name expects.
func storageError(err error, gr schema.GroupResource, name string) error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(conflictMessage))
	case errors.Is(err, storage.ErrCompacted):
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %v", err))
	case errors.Is(err, storage.ErrInvalidContinue):
		return apierrors.NewBadRequest("the provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	}
	return err
}

const conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

// unsupportedMediaType builds a 415 Status.
func unsupportedMediaType(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: msg,
	}}
}

func isConflict(err error) bool { return errors.Is(err, storage.ErrConflict) }

func asMaxBytes(err error, target **http.MaxBytesError) bool { return errors.As(err, target) }

// fieldErrorList reports one invalid list entry.
func fieldErrorList(path string, index int, value string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(path).Index(index), value, "must not be empty")}
}

// fieldErrorListAt reports one invalid field.
func fieldErrorListAt(path string, value interface{}, detail string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(path), value, detail)}
}
