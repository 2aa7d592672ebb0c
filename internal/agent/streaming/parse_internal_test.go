package streaming

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rcproto "k8s.io/apimachinery/pkg/util/remotecommand"
)

func TestParseExecOptions(t *testing.T) {
	cases := []struct {
		name    string
		query   string
		want    execOptions
		wantErr string
	}{
		{name: "output only", query: "output=1", want: execOptions{stdout: true}},
		{name: "all without tty", query: "input=1&output=1&error=1", want: execOptions{stdin: true, stdout: true, stderr: true}},
		{name: "tty", query: "input=1&output=1&tty=1", want: execOptions{stdin: true, stdout: true, tty: true}},
		{name: "only 1 is on", query: "output=true&error=0&input=yes", wantErr: "you must specify at least 1 of stdin, stdout, stderr"},
		{name: "nothing", query: "", wantErr: "you must specify at least 1 of stdin, stdout, stderr"},
		{name: "tty only", query: "tty=1", wantErr: "you must specify at least 1 of stdin, stdout, stderr"},
		{name: "tty and stderr", query: "output=1&error=1&tty=1", wantErr: "cannot exec with tty and stderr"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseExecOptions(q)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(execOptions{})); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePorts(t *testing.T) {
	cases := []struct {
		name    string
		query   string
		want    []int32
		wantErr string
	}{
		{name: "none", query: "", want: nil},
		{name: "repeated", query: "port=80&port=8080", want: []int32{80, 8080}},
		{name: "comma-separated", query: "port=1,65535", want: []int32{1, 65535}},
		{name: "empty", query: "port=", wantErr: `query parameter "port" cannot be empty`},
		{name: "zero", query: "port=0", wantErr: `port "0" must be > 0`},
		{name: "too big", query: "port=65536", wantErr: `unable to parse "65536" as a port: strconv.ParseUint: parsing "65536": value out of range`},
		{name: "not a number", query: "port=80,http", wantErr: `unable to parse "80,http" as a port: strconv.ParseUint: parsing "http": invalid syntax`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parsePorts(q)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExecStatus(t *testing.T) {
	exit3 := metav1.Status{
		Status: metav1.StatusFailure,
		Reason: rcproto.NonZeroExitCodeReason,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type: rcproto.ExitCodeCauseType, Message: "3",
		}}},
	}
	withMessage := func(st metav1.Status, msg string) metav1.Status {
		st.Message = msg
		return st
	}
	cases := []struct {
		name string
		err  error
		want metav1.Status
	}{
		{name: "success", err: nil, want: metav1.Status{Status: metav1.StatusSuccess}},
		{name: "exit code", err: ExitError{Code: 3}, want: withMessage(exit3, "command terminated with non-zero exit code: exit status 3")},
		{name: "wrapped exit code", err: errors.Join(errors.New("in pod"), &ExitError{Code: 3}), want: withMessage(exit3, "command terminated with non-zero exit code: in pod\nexit status 3")},
		{name: "other error", err: errors.New("no such container"), want: metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  metav1.StatusReasonInternalError,
			Code:    500,
			Message: "Internal error occurred: error executing command in container: no such container",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "error executing command in container: no such container"}}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, execStatus(tc.err)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := New(Config{StreamIdleTimeout: -1, StreamCreationTimeout: -1})
	if err == nil {
		t.Fatal("New accepted negative timeouts")
	}
	for _, name := range []string{"streamIdleTimeout", "streamCreationTimeout", "must not be negative"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not mention %q", err, name)
		}
	}
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.StreamIdleTimeout != DefaultStreamIdleTimeout || s.cfg.StreamCreationTimeout != DefaultStreamCreationTimeout || s.cfg.Clock == nil || s.cfg.Logger == nil {
		t.Errorf("defaults not filled in: %+v", s.cfg)
	}
}
