/* The character-class table of http/chars.h, computed by the compiler from the grammar's
 * definitions below: each CH_x(c) is a constant expression, expanded once per byte value. */
#include "http/chars.h"

#define ALNUM(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || \
    ((c) >= '0' && (c) <= '9'))
#define CH_TCHAR(c) (ALNUM(c) || (c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' || \
    (c) == '&' || (c) == '\'' || (c) == '*' || (c) == '+' || (c) == '-' || (c) == '.' || \
    (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' || (c) == '~')
#define CH_VALUE(c) ((c) == '\t' || ((c) >= 0x20 && (c) != 0x7f))
#define CH_TARGET(c) ((c) > 0x20 && (c) < 0x7f && (c) != '"' && (c) != '#' && (c) != '<' && \
    (c) != '>' && (c) != '\\' && (c) != '^' && (c) != '`' && (c) != '{' && (c) != '|' && \
    (c) != '}')
#define CH_HOST(c) ((c) < 0x80 && (c) != '/' && (c) != '?' && (c) != '#' && (c) != '@' && \
    (c) != '\\' && (c) != '"' && (c) != '<' && (c) != '>' && (c) != '{' && (c) != '}' && \
    (c) != '|' && (c) != '^' && (c) != '`')
#define CH_AUTH(c) (ALNUM(c) || (c) == '-' || (c) == '.' || (c) == '_' || (c) == '~' || \
    (c) == '!' || (c) == '$' || (c) == '&' || (c) == '\'' || (c) == '(' || (c) == ')' || \
    (c) == '*' || (c) == '+' || (c) == ',' || (c) == ';' || (c) == '=' || (c) == ':' || \
    (c) == '%' || (c) == '[' || (c) == ']')
#define CH_REGNAME(c) (CH_HOST(c) && (c) != ':' && (c) != '[' && (c) != ']' && (c) != '%' && \
    (c) != ' ' && (c) != '\t')
#define CH_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define CLS(c) ((CH_TCHAR(c) ? LG_CH_TCHAR : 0) | (CH_VALUE(c) ? LG_CH_VALUE : 0) | \
    (CH_TARGET(c) ? LG_CH_TARGET : 0) | (CH_HOST(c) ? LG_CH_HOST : 0) | \
    (CH_AUTH(c) ? LG_CH_AUTH : 0) | (CH_REGNAME(c) ? LG_CH_REGNAME : 0) | \
    (CH_DIGIT(c) ? LG_CH_DIGIT : 0) | (CH_TARGET(c) && (c) != '%' ? LG_CH_TPLAIN : 0))
#define R4(c) CLS(c), CLS((c) + 1), CLS((c) + 2), CLS((c) + 3)
#define R16(c) R4(c), R4((c) + 4), R4((c) + 8), R4((c) + 12)
#define R64(c) R16(c), R16((c) + 16), R16((c) + 32), R16((c) + 48)

const uint8_t lg_http_chars[256] = { R64(0), R64(64), R64(128), R64(192) };
