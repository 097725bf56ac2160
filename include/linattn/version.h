/* linattn version: the single source of truth; CMakeLists.txt parses it. */
#ifndef LINATTN_VERSION_H
#define LINATTN_VERSION_H
#define LA_VERSION_MAJOR 0
#define LA_VERSION_MINOR 1
#define LA_VERSION_PATCH 0
#define LA_VERSION_STRING "0.1.0"
#endif
