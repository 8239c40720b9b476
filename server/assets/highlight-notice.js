/*! highlight.js 9.18.5 (Debian's libjs-highlight.js, whose minified file carries no notice of its own)
 * Copyright (c) 2006, Ivan Sagalaev and highlight.js contributors. BSD-3-Clause license:
 * https://github.com/highlightjs/highlight.js/blob/main/LICENSE
 * (the full text: /usr/share/doc/libjs-highlight.js/copyright on Debian) */
