package shutdown

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"knode/internal/atomicfile"
)

// State is the content of <root-dir>/graceful_node_shutdown_state, as the
// kubelet keeps it: when the last shutdown started and ended. An agent
// that starts restores the two gauges from it.
type State struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// ReadState reads a state file. A missing file is an error wrapping
// os.ErrNotExist.
func ReadState(path string) (State, error) {
	var st State
	data, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

func (m *Manager) writeState(st State) {
	if err := writeJSON(filepath.Join(m.cfg.RootDir, stateFileName), st); err != nil {
		m.log.Warn("writing the shutdown state file failed", "err", err)
	}
}

// writeJSON replaces path with v as indented JSON, atomically.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o644)
}
