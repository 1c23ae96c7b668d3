# Cross-compiling offkv for 64-bit ARM Linux with Debian's cross compiler
# (gcc-aarch64-linux-gnu), against arm64 libraries from Debian's multiarch
# (libpcre2-dev:arm64; scripts/install-deps.sh OKV_ARM=1 installs them).
# Tests run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR): `make test-arm`.
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(OKV_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${OKV_CROSS_TRIPLE}-gcc)

# Headers and libraries: the cross compiler's own sysroot (/usr/aarch64-linux-gnu)
# plus multiarch's /usr/lib/aarch64-linux-gnu; programs are the build machine's.
set(CMAKE_FIND_ROOT_PATH /usr/${OKV_CROSS_TRIPLE})
set(CMAKE_LIBRARY_ARCHITECTURE ${OKV_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config answers for the target's .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${OKV_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# -cpu max has every extension qemu emulates (dotprod, i8mm, ...): OKV_ISA
# caps the level a test runs at.  -L: where the target's loader and libc are.
# The loader and libc must come from the same package: with multiarch's
# libc6:arm64 installed (libpcre2-dev:arm64 pulls it in) a program finds
# /lib/aarch64-linux-gnu/libc.so.6 first, and that libc under the cross
# package's older ld.so hangs in the first pthread_create.  So: the
# multiarch root when it has a loader, the cross sysroot otherwise.
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(okv_qemu_root /)
else()
  set(okv_qemu_root /usr/${OKV_CROSS_TRIPLE})
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;max;-L;${okv_qemu_root})
