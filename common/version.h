/* The release version, shown by --version, logged at start-up and exported as
 * lagless_build_info{version}. */
#ifndef LG_COMMON_VERSION_H
#define LG_COMMON_VERSION_H

#define LG_VERSION "0.1.0"

#endif
