package prefault

import (
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), which the
// syscall package does not name.
const madvPopulateWrite = 23

// inData is a variable the linker puts in the executable's data segment:
// an initialised, writable variable, so the mapping that holds it is the
// one to populate.
var inData = [8]byte{1}

func init() {
	start, end, ok := mappingOf(uintptr(unsafe.Pointer(&inData)))
	if !ok {
		return
	}
	// An error leaves the process as it was: the pages fault in as usual.
	syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateWrite)
}

// mappingOf returns the bounds of the mapping in /proc/self/maps that
// holds addr.
func mappingOf(addr uintptr) (start, end uintptr, ok bool) {
	fd, err := syscall.Open("/proc/self/maps", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer syscall.Close(fd)
	// A static Go binary has a few dozen mappings, a few KiB of text; the
	// data segment is among the first lines.
	var buf [16 << 10]byte
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if m <= 0 || err != nil {
			break
		}
		n += m
	}
	return findMapping(buf[:n], addr)
}

// findMapping reads lines of /proc/PID/maps ("start-end perms offset dev
// inode path", addresses in hex) for the one whose range holds addr.
func findMapping(maps []byte, addr uintptr) (start, end uintptr, ok bool) {
	for len(maps) > 0 {
		line := maps
		if i := indexByte(maps, '\n'); i >= 0 {
			line, maps = maps[:i], maps[i+1:]
		} else {
			maps = nil
		}
		dash := indexByte(line, '-')
		space := indexByte(line, ' ')
		if dash < 0 || space < dash {
			continue
		}
		start, ok1 := parseHex(line[:dash])
		end, ok2 := parseHex(line[dash+1 : space])
		if ok1 && ok2 && start <= addr && addr < end {
			return start, end, true
		}
	}
	return 0, 0, false
}

// indexByte is bytes.IndexByte, written out: importing bytes (which
// imports unicode, initialised after os) would move this package's
// initialisation after os's.
func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func parseHex(b []byte) (uintptr, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uintptr
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
