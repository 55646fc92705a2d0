/*
 * @oduflow/receipt-store native part: the few Linux system calls Node does not
 * expose. Plain Node-API (node_api.h, NAPI_VERSION 8), so one build works on
 * every Node major without a rebuild.
 *
 * Every function is synchronous and returns at once: flock is only ever called
 * here as given by the caller, and the TypeScript side passes LOCK_NB for every
 * attempt (a blocking lock would stall the event loop; see src/lock.ts).
 *
 * Errors are thrown as Error objects shaped like Node's own system errors:
 * `code` ('ELOOP', 'EAGAIN', ...), `errno` (negative, as in Node) and `syscall`.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifndef NAPI_VERSION
#define NAPI_VERSION 8
#endif
#include <node_api.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define NAME_BUF (PATH_MAX + 1)

/* A pending JS exception was already set by a failed napi call. */
#define CHECK(call)                                                            \
  do {                                                                         \
    if ((call) != napi_ok) return NULL;                                        \
  } while (0)

static const char *errno_name(int err) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char *name = strerrorname_np(err);
  if (name != NULL) return name;
#endif
  switch (err) {
    case EAGAIN: return "EAGAIN";
    case EACCES: return "EACCES";
    case EBADF: return "EBADF";
    case EEXIST: return "EEXIST";
    case EINVAL: return "EINVAL";
    case EISDIR: return "EISDIR";
    case ELOOP: return "ELOOP";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOENT: return "ENOENT";
    case ENOSYS: return "ENOSYS";
    case ENOTDIR: return "ENOTDIR";
    case ENOTEMPTY: return "ENOTEMPTY";
    case EPERM: return "EPERM";
    case EXDEV: return "EXDEV";
    default: return "EUNKNOWN";
  }
}

static napi_value throw_errno(napi_env env, int err, const char *syscall_name) {
  const char *code = errno_name(err);
  char message[256];
  snprintf(message, sizeof message, "%s: %s, %s", code, strerror(err), syscall_name);

  napi_value js_code, js_message, js_error, js_errno, js_syscall;
  CHECK(napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &js_code));
  CHECK(napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &js_message));
  CHECK(napi_create_error(env, js_code, js_message, &js_error));
  CHECK(napi_create_int32(env, -err, &js_errno));
  CHECK(napi_create_string_utf8(env, syscall_name, NAPI_AUTO_LENGTH, &js_syscall));
  CHECK(napi_set_named_property(env, js_error, "errno", js_errno));
  CHECK(napi_set_named_property(env, js_error, "syscall", js_syscall));
  napi_throw(env, js_error);
  return NULL;
}

static napi_value get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < want) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_COUNT", "missing arguments");
    return NULL;
  }
  return argv[0];
}

static int get_int(napi_env env, napi_value value, int32_t *out) {
  if (napi_get_value_int32(env, value, out) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "expected an integer");
    return 0;
  }
  return 1;
}

/* Copies a JS string into buf; refuses embedded NUL and overlong names. */
static int get_name(napi_env env, napi_value value, char *buf, size_t size) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, value, buf, size, &len) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "expected a string");
    return 0;
  }
  if (len + 1 >= size) {
    throw_errno(env, ENAMETOOLONG, "name");
    return 0;
  }
  if (strlen(buf) != len) {
    throw_errno(env, EINVAL, "name");
    return 0;
  }
  return 1;
}

static napi_value undefined(napi_env env) {
  napi_value result;
  CHECK(napi_get_undefined(env, &result));
  return result;
}

/* openat(dirfd, name, flags, mode) -> fd. O_CLOEXEC is always added. */
static napi_value js_openat(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  int32_t dirfd, flags, mode;
  char name[NAME_BUF];
  if (get_args(env, info, 4, argv) == NULL) return NULL;
  if (!get_int(env, argv[0], &dirfd) || !get_name(env, argv[1], name, sizeof name) ||
      !get_int(env, argv[2], &flags) || !get_int(env, argv[3], &mode))
    return NULL;
  int fd;
  do fd = openat(dirfd, name, flags | O_CLOEXEC, (mode_t)mode);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return throw_errno(env, errno, "openat");
  napi_value result;
  CHECK(napi_create_int32(env, fd, &result));
  return result;
}

/* mkdirat(dirfd, name, mode) */
static napi_value js_mkdirat(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  int32_t dirfd, mode;
  char name[NAME_BUF];
  if (get_args(env, info, 3, argv) == NULL) return NULL;
  if (!get_int(env, argv[0], &dirfd) || !get_name(env, argv[1], name, sizeof name) ||
      !get_int(env, argv[2], &mode))
    return NULL;
  if (mkdirat(dirfd, name, (mode_t)mode) != 0) return throw_errno(env, errno, "mkdirat");
  return undefined(env);
}

/* unlinkat(dirfd, name, flags) */
static napi_value js_unlinkat(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  int32_t dirfd, flags;
  char name[NAME_BUF];
  if (get_args(env, info, 3, argv) == NULL) return NULL;
  if (!get_int(env, argv[0], &dirfd) || !get_name(env, argv[1], name, sizeof name) ||
      !get_int(env, argv[2], &flags))
    return NULL;
  if (unlinkat(dirfd, name, flags) != 0) return throw_errno(env, errno, "unlinkat");
  return undefined(env);
}

/* renameat2(olddirfd, oldname, newdirfd, newname, flags); flags may hold RENAME_NOREPLACE. */
static napi_value js_renameat2(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  int32_t olddirfd, newdirfd, flags;
  char oldname[NAME_BUF], newname[NAME_BUF];
  if (get_args(env, info, 5, argv) == NULL) return NULL;
  if (!get_int(env, argv[0], &olddirfd) || !get_name(env, argv[1], oldname, sizeof oldname) ||
      !get_int(env, argv[2], &newdirfd) || !get_name(env, argv[3], newname, sizeof newname) ||
      !get_int(env, argv[4], &flags))
    return NULL;
  /* The raw syscall: glibc only gained a wrapper in 2.28. */
  if (syscall(SYS_renameat2, olddirfd, oldname, newdirfd, newname, (unsigned int)flags) != 0)
    return throw_errno(env, errno, "renameat2");
  return undefined(env);
}

/* flock(fd, operation) */
static napi_value js_flock(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  int32_t fd, operation;
  if (get_args(env, info, 2, argv) == NULL) return NULL;
  if (!get_int(env, argv[0], &fd) || !get_int(env, argv[1], &operation)) return NULL;
  int rc;
  do rc = flock(fd, operation);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) return throw_errno(env, errno, "flock");
  return undefined(env);
}

/* readdir(dirfd) -> string[] without "." and "..". Reads through a private duplicate of the fd. */
static napi_value js_readdir(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int32_t dirfd;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if (!get_int(env, argv[0], &dirfd)) return NULL;
  int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return throw_errno(env, errno, "fcntl");
  DIR *dir = fdopendir(dup_fd);
  if (dir == NULL) {
    int err = errno;
    close(dup_fd);
    return throw_errno(env, err, "fdopendir");
  }
  rewinddir(dir); /* the duplicate shares the file offset with dirfd */
  napi_value result;
  if (napi_create_array(env, &result) != napi_ok) {
    closedir(dir);
    return NULL;
  }
  uint32_t index = 0;
  for (;;) {
    errno = 0;
    struct dirent *entry = readdir(dir);
    if (entry == NULL) {
      int err = errno;
      closedir(dir);
      if (err != 0) return throw_errno(env, err, "readdir");
      return result;
    }
    const char *name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    napi_value js_name;
    if (napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &js_name) != napi_ok ||
        napi_set_element(env, result, index++, js_name) != napi_ok) {
      closedir(dir);
      return NULL;
    }
  }
}

static int set_int(napi_env env, napi_value obj, const char *key, int32_t value) {
  napi_value v;
  return napi_create_int32(env, value, &v) == napi_ok && napi_set_named_property(env, obj, key, v) == napi_ok;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  static const struct {
    const char *name;
    napi_callback cb;
  } functions[] = {
      {"openat", js_openat},   {"mkdirat", js_mkdirat}, {"unlinkat", js_unlinkat},
      {"renameat2", js_renameat2}, {"flock", js_flock}, {"readdir", js_readdir},
  };
  for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
    napi_value fn;
    CHECK(napi_create_function(env, functions[i].name, NAPI_AUTO_LENGTH, functions[i].cb, NULL, &fn));
    CHECK(napi_set_named_property(env, exports, functions[i].name, fn));
  }

  napi_value constants;
  CHECK(napi_create_object(env, &constants));
  int ok = set_int(env, constants, "AT_FDCWD", AT_FDCWD) && set_int(env, constants, "AT_REMOVEDIR", AT_REMOVEDIR) &&
           set_int(env, constants, "O_RDONLY", O_RDONLY) && set_int(env, constants, "O_WRONLY", O_WRONLY) &&
           set_int(env, constants, "O_RDWR", O_RDWR) && set_int(env, constants, "O_CREAT", O_CREAT) &&
           set_int(env, constants, "O_EXCL", O_EXCL) && set_int(env, constants, "O_NOFOLLOW", O_NOFOLLOW) &&
           set_int(env, constants, "O_DIRECTORY", O_DIRECTORY) && set_int(env, constants, "O_NONBLOCK", O_NONBLOCK) &&
           set_int(env, constants, "O_CLOEXEC", O_CLOEXEC) && set_int(env, constants, "LOCK_SH", LOCK_SH) &&
           set_int(env, constants, "LOCK_EX", LOCK_EX) && set_int(env, constants, "LOCK_NB", LOCK_NB) &&
           set_int(env, constants, "LOCK_UN", LOCK_UN) && set_int(env, constants, "RENAME_NOREPLACE", RENAME_NOREPLACE);
  if (!ok) return NULL;
  CHECK(napi_set_named_property(env, exports, "constants", constants));
  return exports;
}
