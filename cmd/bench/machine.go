package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// machine describes where the figures were measured.
type machine struct {
	CPUs          int    `json:"cpus"`
	CPUModel      string `json:"cpu_model"`
	MemTotalBytes uint64 `json:"mem_total_bytes"`
	GOOS          string `json:"goos"`
	GOARCH        string `json:"goarch"`
	GoVersion     string `json:"go_version"`
	NATSServer    string `json:"nats_server"`
	GitCommit     string `json:"git_commit,omitempty"`
	GitDirty      bool   `json:"git_dirty,omitempty"`
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(), NATSServer: server.VERSION}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	m.MemTotalBytes = procKiB("/proc/meminfo", "MemTotal")
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			m.GitDirty = len(strings.TrimSpace(string(st))) > 0
		}
	}
	return m
}

// procField is the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// procKiB is a "key: N kB" field of a /proc file in bytes (0 when absent).
func procKiB(path, key string) uint64 {
	kib, err := strconv.ParseUint(strings.TrimSuffix(procField(path, key), " kB"), 10, 64)
	if err != nil {
		return 0
	}
	return kib * 1024
}
