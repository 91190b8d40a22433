# TMX_CHECK_FEATURE(name, description, help-verb, test-commands)
# One macro behind every --enable-<name>=yes|no|auto switch. The test commands set
# tmx_have=yes|no. Asked for by name (yes) but missing fails configure; auto quietly
# goes without. Result: tmx_have_<name>, AM_CONDITIONAL HAVE_<NAME>, HAVE_<NAME> in config.h.
# --with-<name>=yes|no|auto is taken as a synonym (--enable-<name> wins when both are given).
AC_DEFUN([TMX_CHECK_FEATURE], [
  AC_ARG_WITH([$1],
    [AS_HELP_STRING([--with-$1=yes|no|auto], [the same as --enable-$1])],
    [], [with_$1=auto])
  AC_ARG_ENABLE([$1],
    [AS_HELP_STRING([--enable-$1=yes|no|auto], [$3 $2 (default: auto)])],
    [], [enable_$1=$with_$1])
  tmx_have=no
  AS_IF([test "x$enable_$1" != "xno"], [$4])
  AS_IF([test "x$enable_$1" = "xyes" && test "x$tmx_have" != "xyes"],
    [AC_MSG_ERROR([--enable-$1=yes was given but $2 was not found])])
  tmx_have_$1=$tmx_have
  AS_IF([test "x$tmx_have" = "xyes"],
    [AC_DEFINE([HAVE_]m4_toupper([$1]), [1], [$2 is available])])
  AM_CONDITIONAL([HAVE_]m4_toupper([$1]), [test "x$tmx_have" = "xyes"])
])
# TMX_CHECK_PROVIDER(name, description, test-commands)
AC_DEFUN([TMX_CHECK_PROVIDER], [TMX_CHECK_FEATURE([$1], [$2], [build the $1 provider over], [$3])])
# TMX_CHECK_OPTIONAL(name, description, test-commands)
AC_DEFUN([TMX_CHECK_OPTIONAL], [TMX_CHECK_FEATURE([$1], [$2], [use], [$3])])
