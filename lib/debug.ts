// NODE_DEBUG=cordon turns this on; nothing else prints.
import { debuglog } from 'node:util';

export const debug = debuglog('cordon');
