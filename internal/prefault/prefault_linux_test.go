package prefault

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestDataSegmentIsPopulated checks what init did to this test binary:
// every page of the mapping holding the data segment is resident and
// already copied (private, dirty), where a process that had only faulted
// pages in as it wrote them would hold a part of the segment.
func TestDataSegmentIsPopulated(t *testing.T) {
	start, end, ok := mappingOf(uintptr(unsafe.Pointer(&inData)))
	if !ok {
		t.Fatal("no mapping in /proc/self/maps holds the data segment")
	}
	size, dirty := smapsOf(t, start)
	if size != int64(end-start)>>10 {
		t.Fatalf("smaps says the mapping is %d KiB, maps %d KiB", size, (end-start)>>10)
	}
	if dirty != size {
		t.Fatalf("%d of the data segment's %d KiB are private and dirty, want all", dirty, size)
	}
}

// smapsOf returns the Size and Private_Dirty (KiB) of the mapping that
// starts at start, from /proc/self/smaps.
func smapsOf(t *testing.T, start uintptr) (size, dirty int64) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if field, _, _ := strings.Cut(line, " "); strings.Contains(field, "-") {
			s, _, ok := findMapping([]byte(line), start)
			in = ok && s == start
			continue
		}
		if !in {
			continue
		}
		var v int64
		if _, err := fmt.Sscanf(line, "Size: %d kB", &v); err == nil {
			size = v
		}
		if _, err := fmt.Sscanf(line, "Private_Dirty: %d kB", &v); err == nil {
			dirty = v
		}
	}
	if size == 0 {
		t.Fatalf("no mapping at %x in /proc/self/smaps", start)
	}
	return size, dirty
}

func TestFindMapping(t *testing.T) {
	maps := []byte("00400000-01112000 r-xp 00000000 00:1f 123 /usr/bin/nerve\n" +
		"01ec1000-01fcd000 rw-p 01ac1000 00:1f 123 /usr/bin/nerve\n" +
		"garbage line\n" +
		"zz-01 rw-p 0 0 0\n" +
		"7ffc6b000000-7ffc6b021000 rw-p 00000000 00:00 0 [stack]")
	for _, tc := range []struct {
		addr       uintptr
		start, end uintptr
		ok         bool
	}{
		{0x1ec1000, 0x1ec1000, 0x1fcd000, true},
		{0x1fccfff, 0x1ec1000, 0x1fcd000, true},
		{0x1fcd000, 0, 0, false},
		{0x7ffc6b000010, 0x7ffc6b000000, 0x7ffc6b021000, true},
		{0x10, 0, 0, false},
	} {
		start, end, ok := findMapping(maps, tc.addr)
		if start != tc.start || end != tc.end || ok != tc.ok {
			t.Errorf("findMapping(%#x) = %#x, %#x, %v; want %#x, %#x, %v", tc.addr, start, end, ok, tc.start, tc.end, tc.ok)
		}
	}
}
