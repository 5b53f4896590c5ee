//go:build unix

package storage

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func identityOf(f File) (Identity, error) {
	if of, ok := f.(*os.File); ok {
		var st unix.Stat_t
		if err := unix.Fstat(int(of.Fd()), &st); err != nil {
			return Identity{}, err
		}
		return Identity{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size,
			Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return Identity{}, err
	}
	id := identityOfInfo(fi)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino = uint64(st.Dev), uint64(st.Ino)
	}
	return id, nil
}
