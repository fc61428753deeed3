package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServerConfigPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "quire.yaml")
	if err := os.WriteFile(file, []byte("num.partitions: 2\nlog.retention.hours: 10\nmessage.max.bytes: 5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"QUIRE_NUM_PARTITIONS": "4", "QUIRE_LOG_RETENTION_HOURS": "20"}
	f := &serverFlags{dev: true, configFile: file, dataDir: filepath.Join(dir, "data"), sets: []string{"log.retention.hours=30"}}
	cfg, err := serverConfig(f, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MessageMaxBytes != 5000 || cfg.NumPartitions != 4 || cfg.LogRetentionHours != 30 ||
		cfg.DataDir != filepath.Join(dir, "data") || cfg.ListenAddr != "127.0.0.1:9092" || !cfg.AutoCreateTopicsEnable {
		t.Fatalf("config: %+v", cfg)
	}
}

func TestServerConfigDevDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := serverConfig(&serverFlags{dev: true}, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if cfg.DataDir != filepath.Join(wd, "quire-data") || cfg.ListenAddr != "127.0.0.1:9092" {
		t.Fatalf("dev: %+v", cfg)
	}
}

func TestServerConfigErrors(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, sets := range [][]string{{"nokey=1"}, {"num.partitions"}, {"num.partitions=x"}} {
		if _, err := serverConfig(&serverFlags{dev: true, sets: sets}, none); err == nil {
			t.Errorf("--set %v accepted", sets)
		}
	}
	_, err := serverConfig(&serverFlags{dev: true}, func(k string) (string, bool) {
		if k == "QUIRE_NUM_PARTITIONS" {
			return "zero", true
		}
		return "", false
	})
	if err == nil || !strings.Contains(err.Error(), "QUIRE_NUM_PARTITIONS") {
		t.Errorf("bad env: %v", err)
	}
	if _, err := serverConfig(&serverFlags{configFile: "/nonexistent.yaml"}, none); err == nil {
		t.Errorf("missing config file accepted")
	}
}
