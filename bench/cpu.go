package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessCPU returns a reader of the CPU time (user and system, all its
// threads) process pid has used so far, from /proc/PID/stat, whose
// figures are in clock ticks: sysconf(_SC_CLK_TCK), asked of getconf
// once here, 100 where getconf does not answer (USER_HZ is 100 on every
// Linux architecture Go runs on).
func ProcessCPU(pid int) func() (time.Duration, error) {
	ticks := clockTicks()
	path := fmt.Sprintf("/proc/%d/stat", pid)
	return func() (time.Duration, error) {
		raw, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("process CPU: %w", err)
		}
		return parseStatCPU(string(raw), ticks)
	}
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line; the command name (field 2, in parentheses) may
// hold spaces and parentheses, so fields are counted after its last ')'.
func parseStatCPU(stat string, ticks int64) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("process CPU: not a /proc stat line: %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state): utime is fields[11], stime fields[12].
	if len(fields) < 13 {
		return 0, fmt.Errorf("process CPU: short /proc stat line: %q", stat)
	}
	var sum int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process CPU: %w", err)
		}
		sum += n
	}
	return time.Duration(sum) * time.Second / time.Duration(ticks), nil
}

// clockTicks is the unit of /proc/PID/stat's times, in ticks a second.
func clockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 100
}

// selfCPU is the CPU time (user and system) this process has used so far.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("own CPU: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
