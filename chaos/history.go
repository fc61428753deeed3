// Package chaos is Quire's fault-injection suite: it starts clusters of
// real `quire server` processes, runs workloads against them while a
// nemesis kills, pauses, cuts off and corrupts nodes and steps their
// clocks, heals everything,
// and checks the recorded history for the anomalies a replicated log must
// never show (lost, duplicated or inconsistent records, offsets that move
// backwards, reads of writes that failed). The history is JSON lines, so
// a saved run can be checked again (`chaos check FILE`).
package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Kind is what an event records.
type Kind string

// The kinds of event in a history.
const (
	// A producer is about to send Value to Partition.
	Send Kind = "send"
	// The cluster acknowledged Value at Offset (acks=all).
	Ack Kind = "ack"
	// The write of Value definitely did not happen (refused before append).
	Fail Kind = "fail"
	// The write of Value may or may not have happened (a timeout, a lost
	// connection, a leader change after the append).
	Unknown Kind = "unknown"
	// A reader read Value at Offset.
	Read Kind = "read"
	// A reader starts (again) at Offset: its next reads need not follow
	// its previous ones.
	ReaderReset Kind = "reader-reset"
	// The high watermark of Partition was Offset, as a client saw it.
	HW Kind = "hw"
	// The final read after healing: every record of Partition below the
	// high watermark, in order (Value at Offset).
	Final Kind = "final"
	// After healing, Partition's log start offset was Offset: the final
	// read starts there (nothing below it can be read any more).
	LogStart Kind = "log-start"
	// A group member (Process) was given Partition: it reads it from now.
	Assign Kind = "assign"
	// A group member gave Partition up: it reads it no more.
	Revoke Kind = "revoke"
	// A group member read Value at Offset.
	GroupRead Kind = "group-read"
	// The group's committed offset of Partition was Offset, as a client
	// saw it.
	Committed Kind = "committed"
	// A fault began (Fault names it, Node the node or nodes).
	FaultStart Kind = "fault-start"
	// A fault ended.
	FaultEnd Kind = "fault-end"

	// The transactional workload (txn.go). Process is the transactional
	// id, Txn the transaction ("id.n").
	//
	// A transaction is about to write Value to Partition of the output.
	TxnSend Kind = "txn-send"
	// The write of Value was answered: it is at Offset (visible once the
	// transaction commits, never if it aborts).
	TxnWrite Kind = "txn-write"
	// The transaction sends the group's offset Offset of the input's
	// Partition (consume-transform-produce).
	TxnOffsets Kind = "txn-offsets"
	// The application calls Commit: from now on the transaction's
	// records may be read.
	TxnCommitting Kind = "txn-committing"
	// Commit was acknowledged.
	TxnCommit Kind = "txn-commit"
	// The transaction was never committed: aborted (Error says why:
	// deliberate, a call failed) or abandoned by its application, whose
	// next instance fenced it.
	TxnAbort Kind = "txn-abort"
	// Commit failed (Error): the transaction may have committed or not.
	TxnUnknown Kind = "txn-unknown"
	// A fenced instance had a write or a commit accepted (Error).
	TxnZombie Kind = "txn-zombie"
	// The read_committed reader of the output read Value at Offset.
	TxnRead Kind = "txn-read"
	// The final read_committed read of the output after healing.
	TxnFinal Kind = "txn-final"
	// The final read_uncommitted read of the output: every record in the
	// log, aborted ones too.
	TxnLog Kind = "txn-log"
	// The input after healing: Value at Offset of Partition.
	TxnInput Kind = "txn-input"
	// The group's committed offset of the input's Partition after
	// healing (0 when none).
	TxnGroupOffset Kind = "txn-group-offset"
)

// Event is one line of a history.
type Event struct {
	Time      time.Time `json:"time"`
	Kind      Kind      `json:"kind"`
	Process   string    `json:"process,omitempty"` // the producer or reader
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Value     string    `json:"value,omitempty"`
	Fault     string    `json:"fault,omitempty"`
	Node      string    `json:"node,omitempty"`
	Error     string    `json:"error,omitempty"`
	Txn       string    `json:"txn,omitempty"`
}

// History collects events from many goroutines and writes them, as JSON
// lines, to w as they come (when w is not nil).
type History struct {
	mu     sync.Mutex
	events []Event
	enc    *json.Encoder
	err    error
}

// NewHistory returns a history that also writes to w (nil: memory only).
func NewHistory(w io.Writer) *History {
	h := &History{}
	if w != nil {
		h.enc = json.NewEncoder(w)
	}
	return h
}

// Add records e, stamping it with the time if it has none.
func (h *History) Add(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	if h.enc != nil && h.err == nil {
		h.err = h.enc.Encode(e)
	}
}

// Events returns a copy of the events so far.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// Err is the first error writing the history out.
func (h *History) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// ReadHistory reads a history written by History.
func ReadHistory(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("chaos: history line %d: %w", line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// ReadHistoryFile reads a history file.
func ReadHistoryFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadHistory(f)
}
