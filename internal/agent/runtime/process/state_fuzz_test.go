//go:build linux

package process

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadState feeds the state-file decoder arbitrary bytes: it must
// either refuse them with an error naming the file, or return a state that
// validates, and never panic.
func FuzzReadState(f *testing.F) {
	f.Add([]byte(`{"version":1,"runs":2,"pid":4242,"containerID":"process://u/c/1","restartCount":1,"startedAt":"2026-11-25T12:00:00Z"}`))
	f.Add([]byte(`{"version":1,"runs":1,"startedAt":"2026-11-25T12:00:00Z","exit":{"exitCode":1,"reason":"Error","finishedAt":"2026-11-25T12:00:01Z"}}`))
	// The cgroup as a cgroups.Layout path, and as the absolute cgroup2
	// directory older agents recorded.
	f.Add([]byte(`{"version":1,"runs":1,"pid":4242,"cgroup":"kubepods/burstable/podu/c-0","containerID":"process://u/c/0","startedAt":"2026-11-25T12:00:00Z"}`))
	f.Add([]byte(`{"version":1,"runs":1,"pid":4242,"cgroup":"/sys/fs/cgroup/knode/podu/c-0","containerID":"process://u/c/0","startedAt":"2026-11-25T12:00:00Z"}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), stateFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := readState(path)
		if err != nil {
			if st != nil {
				t.Fatalf("readState returned a state with error %v", err)
			}
			return
		}
		if st == nil {
			t.Fatal("readState returned neither a state nor an error for an existing file")
		}
		if err := st.validate(); err != nil {
			t.Fatalf("readState accepted a state that does not validate: %v", err)
		}
	})
}
